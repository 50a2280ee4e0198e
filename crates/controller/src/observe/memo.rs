//! Memory of past comparisons and failures, so a steady state costs nothing.
//!
//! A comparison is reused while neither the desired object (by hash) nor
//! the live object (by resourceVersion) changed; a revision that failed is
//! retried with exponential backoff, not in a hot loop. The server's last
//! prediction of an object is kept too — only Git's fields of it, and
//! nothing when the server kept them as sent — so a change made by someone
//! else can be judged without asking the API server again, and the flap
//! guard remembers which fields Tether keeps reverting.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tether_core::ObjectRef;
use tether_core::diff::{Diff, as_predicted};
use tether_core::drift::FlapGuard;

use crate::api::ApplicationStatus;

/// One applied object: what was sent and what the API server returned.
#[derive(Debug, Clone)]
pub struct AppliedObject {
    pub id: ObjectRef,
    pub sent: Value,
    pub live: Value,
}

/// The last comparison of one object. The live object's resourceVersion
/// is kept as a hash: it is only ever compared for equality, and a
/// thousand apps' objects cost a string each otherwise.
#[derive(Debug, Clone)]
pub struct Compared {
    pub desired_hash: u64,
    pub live_version: u64,
    pub diff: Diff,
    /// What the API server said Git's fields of the object would be once
    /// `desired_hash` is applied (from a dry-run or apply result).
    pub predicted: Option<Prediction>,
}

/// The server's prediction of Git's fields of an object: only the fields
/// the desired object names, as the server would store them (defaults,
/// status, `managedFields` and other writers' fields are not kept; they
/// would cost a whole object per managed object). Most objects are stored
/// exactly as sent, which costs nothing to remember.
#[derive(Debug, Clone, PartialEq)]
pub enum Prediction {
    /// The server keeps Git's fields exactly as sent.
    AsSent,
    /// The server stores some of Git's fields differently (a quantity
    /// normalized, a number for a string): Git's fields as it stores them.
    Normalized(Arc<Value>),
}

impl Prediction {
    /// Git's fields of `server` (a dry-run or apply result), for the
    /// desired object `desired` it was predicted from.
    pub fn of(desired: &Value, server: &Value) -> Prediction {
        let wanted = as_predicted(desired, server);
        if wanted == *desired {
            Prediction::AsSent
        } else {
            Prediction::Normalized(Arc::new(wanted))
        }
    }

    /// Git's fields as the server stores them, for `desired` (the object
    /// this prediction was made from).
    pub fn wanted<'a>(&'a self, desired: &'a Value) -> &'a Value {
        match self {
            Prediction::AsSent => desired,
            Prediction::Normalized(wanted) => wanted,
        }
    }
}

/// Failed attempts at one revision.
#[derive(Debug, Clone)]
pub struct Failures {
    pub revision: String,
    pub attempts: u32,
    pub last: Instant,
    /// What the failure named as missing: its appearance is worth a retry
    /// at once, whatever the back-off says.
    pub awaiting: Option<Awaited>,
}

/// Something a failed sync found missing, which may appear on its own (an
/// operator creates the namespace; another app installs the CRD).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Awaited {
    Namespace(String),
    Kind { api_version: String, kind: String },
}

impl std::fmt::Display for Awaited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Awaited::Namespace(name) => write!(f, "namespace {name}"),
            Awaited::Kind { api_version, kind } => write!(f, "{api_version} {kind}"),
        }
    }
}

/// How failed syncs are retried: `limit` attempts per revision with a
/// back-off from `base` doubling to `max`, then one attempt per `periodic`
/// (the resync interval) until a new revision or a success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub limit: u32,
    pub base: Duration,
    pub max: Duration,
    pub periodic: Duration,
}

impl RetryPolicy {
    /// How long after attempt number `attempts` failed the next may run.
    pub fn wait_after(&self, attempts: u32) -> Duration {
        if attempts < self.limit {
            tether_core::backoff::doubling(attempts, self.base, self.max)
        } else {
            self.periodic
        }
    }
}

/// What the controller remembers about one application.
#[derive(Debug, Default)]
pub struct AppMemo {
    /// By the hash of the object's identity ([`id_hash`]): the memory is
    /// only ever asked about one object, and an identity is four strings.
    pub compared: HashMap<u64, Compared>,
    pub failures: Option<Failures>,
    /// Reconciles in a row that failed before a sync could run (the API
    /// server overloaded or away, the repository unreachable): the next is
    /// tried after a back-off from 2 s, not a whole resync later.
    pub failed_passes: u32,
    pub flaps: FlapGuard,
    /// The status this controller last wrote. The Application in the watch
    /// cache can lag behind it (a reconcile woken by the watch events of
    /// objects it just applied may run before the cache sees its own status
    /// write), and computing from a stale status would rewrite the status
    /// without the revision and history just recorded. Dropped once the
    /// cache holds it ([`crate::context::Context::cache_saw`]), unless
    /// `status_held`.
    pub written_status: Option<Box<ApplicationStatus>>,
    /// A sync's progress writes (`operationState` Running, which clears
    /// the hook or wave it waits on) change the stored status apart from
    /// the status the sync works from: that one is held here until the
    /// next full status write, whatever the cache shows
    /// ([`crate::reconcile::Pass::hold_status`]).
    pub status_held: bool,
    /// The uid of the Application this memory is about: an app deleted and
    /// created again under the same name starts with a clean slate.
    pub uid: Option<String>,
}

impl AppMemo {
    /// The remembered diff of `id`, if desired and live are unchanged since.
    pub fn reuse(&self, id: &ObjectRef, desired_hash: u64, live_version: &str) -> Option<Diff> {
        self.compared
            .get(&id_hash(id))
            .filter(|c| c.desired_hash == desired_hash && c.live_version == hash_str(live_version))
            .map(|c| c.diff.clone())
    }

    /// The server's prediction of `id` for the desired object `desired_hash`.
    pub fn predicted(&self, id: &ObjectRef, desired_hash: u64) -> Option<Prediction> {
        self.compared
            .get(&id_hash(id))
            .filter(|c| c.desired_hash == desired_hash)
            .and_then(|c| c.predicted.clone())
    }

    pub fn remember(
        &mut self,
        id: &ObjectRef,
        desired_hash: u64,
        live_version: &str,
        diff: Diff,
        predicted: Option<Prediction>,
    ) {
        let predicted = predicted.or_else(|| self.predicted(id, desired_hash));
        self.compared.insert(
            id_hash(id),
            Compared {
                desired_hash,
                live_version: hash_str(live_version),
                diff,
                predicted,
            },
        );
    }

    /// Remembers that `applied` is in sync at the version it was written,
    /// so its own watch event costs no new comparison.
    pub fn remember_applied(&mut self, applied: &AppliedObject) {
        let version = applied
            .live
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        self.remember(
            &applied.id,
            hash_object(&applied.sent),
            version,
            Diff::default(),
            Some(Prediction::of(&applied.sent, &applied.live)),
        );
    }

    /// Records a failed sync of `revision`, and what the failure named as
    /// missing, if anything; returns the attempts so far.
    pub fn fail(&mut self, revision: &str, awaiting: Option<Awaited>) -> u32 {
        let attempts = match &self.failures {
            Some(f) if f.revision == revision => f.attempts.saturating_add(1),
            _ => 1,
        };
        self.failures = Some(Failures {
            revision: revision.to_string(),
            attempts,
            last: Instant::now(),
            awaiting,
        });
        attempts
    }

    /// Whether a sync of `revision` may run now under `retry`.
    pub fn may_sync(&self, revision: &str, retry: &RetryPolicy) -> bool {
        self.retry_in(revision, retry)
            .is_none_or(|wait| wait.is_zero())
    }

    /// How long until a failed sync of `revision` may be tried again;
    /// `None` when none failed.
    pub fn retry_in(&self, revision: &str, retry: &RetryPolicy) -> Option<Duration> {
        let f = self.failures.as_ref().filter(|f| f.revision == revision)?;
        Some(
            retry
                .wait_after(f.attempts)
                .saturating_sub(f.last.elapsed()),
        )
    }

    /// What the last failure is waiting for, if anything.
    pub fn awaiting(&self) -> Option<&Awaited> {
        self.failures.as_ref()?.awaiting.as_ref()
    }

    /// What the last failure waited for appeared: the next sync runs at
    /// once (it still counts as an attempt).
    pub fn awaited_appeared(&mut self) {
        if let Some(f) = &mut self.failures {
            f.awaiting = None;
            f.last = Instant::now() - retry_anyway(f.attempts);
        }
    }

    pub fn succeed(&mut self) {
        self.failures = None;
    }
}

/// Long enough ago that any back-off after `attempts` has passed.
fn retry_anyway(attempts: u32) -> Duration {
    Duration::from_secs(24 * 3600).saturating_mul(attempts.max(1))
}

/// A stable-within-this-process hash of a desired object.
pub fn hash_object(object: &Value) -> u64 {
    hash_str(&object.to_string())
}

/// The key of `id` in an app's comparison memory.
fn id_hash(id: &ObjectRef) -> u64 {
    let mut hasher = DefaultHasher::new();
    id.hash(&mut hasher);
    hasher.finish()
}

fn hash_str(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry(limit: u32, base: u64, max: u64, periodic: u64) -> RetryPolicy {
        RetryPolicy {
            limit,
            base: Duration::from_secs(base),
            max: Duration::from_secs(max),
            periodic: Duration::from_secs(periodic),
        }
    }

    #[test]
    fn a_failed_revision_waits_and_a_new_revision_does_not() {
        let mut memo = AppMemo::default();
        memo.fail("abc", None);
        let retry = retry(5, 60, 600, 180);
        assert!(!memo.may_sync("abc", &retry));
        assert!(memo.may_sync("def", &retry));
        let wait = memo.retry_in("abc", &retry).unwrap();
        assert!(wait > Duration::from_secs(59) && wait <= Duration::from_secs(60));
    }

    #[test]
    fn a_revision_that_used_up_its_attempts_is_retried_once_per_period() {
        let mut memo = AppMemo::default();
        for _ in 0..3 {
            memo.fail("abc", None);
        }
        assert!(!memo.may_sync("abc", &retry(3, 0, 0, 180)));
        let wait = memo.retry_in("abc", &retry(3, 0, 0, 180)).unwrap();
        assert!(wait > Duration::from_secs(179), "{wait:?}");
        assert!(memo.may_sync("abc", &retry(3, 0, 0, 0)));
    }

    #[test]
    fn the_namespace_a_failure_waited_for_appearing_allows_a_retry_at_once() {
        let mut memo = AppMemo::default();
        let missing = Awaited::Namespace("retry-test".into());
        memo.fail("abc", Some(missing.clone()));
        let retry = retry(5, 60, 600, 180);
        assert_eq!(memo.awaiting(), Some(&missing));
        assert!(!memo.may_sync("abc", &retry));
        memo.awaited_appeared();
        assert!(memo.may_sync("abc", &retry));
        assert_eq!(memo.awaiting(), None);
        // It still counts as an attempt: the next failure backs off longer.
        assert_eq!(memo.fail("abc", None), 2);
    }
}
