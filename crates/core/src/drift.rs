//! Drift: which kind of drift an object shows, and when to stop fighting it.
//!
//! Drift is any change to live state that did not come through the loop.
//! [`classify`] names its kind from what was observed — a missing object, a
//! sync that stopped half-way, fields written by someone other than Tether,
//! open break-glass windows — and [`FlapGuard`] decides whether reverting a
//! field again is worth it, or whether Tether is fighting another writer and
//! should back off. Time is an input everywhere: core has no clock.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::attribution::{Ownership, Writer};
use crate::diff::{Diff, FieldDiff};
use crate::object::ObjectRef;
use crate::tracking::{AppRef, FIELD_MANAGER};

crate::vocabulary! {
    /// The kind of a drift; the same words in status, CLI, events and metrics.
    pub enum DriftKind("drift kind") {
        /// Someone changed a managed field outside the loop (`kubectl edit`,
        /// `scale`, `patch`, `apply`). Self-heal reverts it.
        Manual,
        /// Partial state: the object is missing, or a sync stopped half-way.
        /// Self-heal converges it.
        Accidental,
        /// A change made inside an open break-glass window. Not reverted while
        /// the window is open; adopted into Git or reverted afterwards.
        Emergency,
    }
}

crate::vocabulary! {
    /// What Tether did about a drifted object, as status records it.
    pub enum DriftOutcome("drift outcome") {
        /// Reverted to Git's state.
        Healed,
        /// Left alone and reported: self-heal off, warn mode, opted out, or
        /// a break-glass window covers it.
        Reported,
        /// Left alone for a while: Tether kept reverting it and another
        /// writer kept changing it back.
        BackedOff,
    }
}

/// One drifted field as recorded in status: where, desired and live values
/// (Secret values already masked by the diff) and who last wrote it.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftedField {
    /// Dotted path: `spec.template.spec.containers[name=app].image`.
    pub path: String,
    /// JSON pointer into the live object: `/spec/template/spec/containers/0/image`.
    pub pointer: String,
    pub desired: Option<Value>,
    pub live: Option<Value>,
    pub writer: Option<Writer>,
}

impl DriftedField {
    /// The record of `field`, written last by `writer`.
    pub fn new(field: &FieldDiff, writer: Option<Writer>) -> Self {
        DriftedField {
            path: field.path.to_string(),
            pointer: field.path.pointer(),
            desired: field.desired.clone(),
            live: field.live.clone(),
            writer,
        }
    }
}

/// The fields of `diff`, each attributed through `ownership`.
pub fn drifted_fields(diff: &Diff, ownership: &Ownership<'_>) -> Vec<DriftedField> {
    ownership
        .attribute(diff)
        .into_iter()
        .map(|(field, writer)| DriftedField::new(field, writer))
        .collect()
}

/// A drifted object, as status, `tether drift` and events report it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftRecord {
    pub object: ObjectRef,
    pub kind: DriftKind,
    /// Empty when the object is missing.
    pub fields: Vec<DriftedField>,
    /// When the drift was detected (RFC 3339, from the caller's clock).
    pub detected_at: String,
}

/// What the live side of an object looks like.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LiveState<'a> {
    /// The object does not exist.
    Missing,
    /// The object exists; these fields differ from desired state.
    Present(&'a [DriftedField]),
}

/// Everything [`classify`] needs to know about one object.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observation<'a> {
    pub app: &'a AppRef,
    pub object: &'a ObjectRef,
    pub live: LiveState<'a>,
    /// Tether applied this object before (it is in the app's inventory).
    pub applied: bool,
    /// Desired state changed since Tether last applied this object: a field
    /// that nobody owns may simply not be applied yet.
    pub pending: bool,
    /// The app's last sync stopped half-way (see [`is_partial_sync`]).
    pub interrupted_sync: bool,
}

/// An open-or-closed break-glass window and what it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowScope {
    pub app: AppRef,
    /// The objects in scope; empty means the whole app.
    pub objects: Vec<ObjectRef>,
    pub opened_at: SystemTime,
    pub expires_at: SystemTime,
}

impl WindowScope {
    /// Whether this window is open at `at` and covers `object` of `app`.
    pub fn covers(&self, app: &AppRef, object: &ObjectRef, at: SystemTime) -> bool {
        self.app == *app
            && (self.objects.is_empty() || self.objects.contains(object))
            && self.opened_at <= at
            && at < self.expires_at
    }
}

/// The kind of drift `observation` shows at `now`, or `None` when there is
/// none (live matches, or the only differences are a sync not yet applied).
///
/// A missing object Tether applied before is [`DriftKind::Accidental`]. A
/// field last written by another manager — or owned by nobody although
/// nothing is pending, which is how a removed field looks — is
/// [`DriftKind::Manual`], or [`DriftKind::Emergency`] while one of `windows`
/// covers the object. Otherwise differences left by an interrupted sync are
/// [`DriftKind::Accidental`].
pub fn classify(
    observation: &Observation<'_>,
    windows: &[WindowScope],
    now: SystemTime,
) -> Option<DriftKind> {
    let fields = match observation.live {
        LiveState::Missing => return observation.applied.then_some(DriftKind::Accidental),
        LiveState::Present(fields) => fields,
    };
    let foreign = fields.iter().any(|field| match &field.writer {
        Some(writer) => writer.manager != FIELD_MANAGER,
        None => !observation.pending,
    });
    let in_window = || {
        windows
            .iter()
            .any(|window| window.covers(observation.app, observation.object, now))
    };
    if foreign {
        Some(if in_window() {
            DriftKind::Emergency
        } else {
            DriftKind::Manual
        })
    } else if observation.interrupted_sync && !fields.is_empty() {
        Some(DriftKind::Accidental)
    } else {
        None
    }
}

/// Whether a sync to `target` stopped half-way: of the app's objects, whose
/// last-applied revisions are `revisions` (`None`: never applied), some are
/// at `target` and some are not.
pub fn is_partial_sync<'r>(
    revisions: impl IntoIterator<Item = Option<&'r str>>,
    target: &str,
) -> bool {
    let (mut at_target, mut behind) = (false, false);
    for revision in revisions {
        if revision == Some(target) {
            at_target = true;
        } else {
            behind = true;
        }
    }
    at_target && behind
}

/// When the flap guard steps in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlapPolicy {
    /// Reverts of one field allowed within `window` before backing off.
    pub max_reverts: usize,
    pub window: Duration,
    /// The first back-off; each further one doubles, up to `max_backoff`.
    pub first_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for FlapPolicy {
    /// Three reverts in five minutes; back off for one minute, doubling up
    /// to an hour.
    fn default() -> Self {
        FlapPolicy {
            max_reverts: 3,
            window: Duration::from_secs(5 * 60),
            first_backoff: Duration::from_secs(60),
            max_backoff: Duration::from_secs(60 * 60),
        }
    }
}

/// Whether to revert a drifted field now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealVerdict {
    Heal,
    /// Tether is fighting another writer: leave the field until `until`.
    BackOff(Fight),
}

/// A field Tether keeps reverting and someone keeps changing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fight {
    pub object: ObjectRef,
    /// Dotted path of the field.
    pub path: String,
    /// The other writer's field manager, when known.
    pub writer: Option<String>,
    /// How many times in a row Tether has backed off for this field.
    pub backoffs: u32,
    pub until: SystemTime,
}

/// The condition message for a fight; names the object, the field and the
/// other writer.
impl fmt::Display for Fight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let writer = match &self.writer {
            Some(manager) => format!("`{manager}`"),
            None => "an unknown writer".to_string(),
        };
        write!(
            f,
            "{}: fighting with {writer} over {} — add an ignoreDifferences rule or stop the other writer",
            self.object, self.path
        )
    }
}

#[derive(Debug, Clone, Default)]
struct History {
    reverts: VecDeque<SystemTime>,
    backoffs: u32,
    until: Option<SystemTime>,
}

/// Remembers reverts per (object, field) and decides when to stop.
///
/// After more than `max_reverts` reverts of one field within `window`, it
/// backs off; once a back-off ends, one more revert is allowed, and a field
/// that flaps again within the window backs off twice as long. A field left
/// alone for a whole window after its back-off starts afresh.
#[derive(Debug, Clone, Default)]
pub struct FlapGuard {
    policy: FlapPolicy,
    fields: HashMap<(ObjectRef, String), History>,
}

impl FlapGuard {
    pub fn new(policy: FlapPolicy) -> Self {
        FlapGuard {
            policy,
            fields: HashMap::new(),
        }
    }

    /// Whether to revert field `path` of `object`, last written by
    /// `writer`, at `now`. A `Heal` verdict is counted as a revert.
    pub fn decide(
        &mut self,
        object: &ObjectRef,
        path: &str,
        writer: Option<&str>,
        now: SystemTime,
    ) -> HealVerdict {
        let policy = self.policy;
        let history = self
            .fields
            .entry((object.clone(), path.to_string()))
            .or_default();
        let fight = |backoffs, until| {
            HealVerdict::BackOff(Fight {
                object: object.clone(),
                path: path.to_string(),
                writer: writer.map(str::to_string),
                backoffs,
                until,
            })
        };
        while history
            .reverts
            .front()
            .is_some_and(|at| now.duration_since(*at).unwrap_or_default() > policy.window)
        {
            history.reverts.pop_front();
        }
        if let Some(until) = history.until.filter(|until| now < *until) {
            return fight(history.backoffs, until);
        }
        let calm = history
            .until
            .is_none_or(|until| now.duration_since(until).unwrap_or_default() > policy.window);
        if history.reverts.is_empty() && calm {
            history.backoffs = 0;
        }
        let allowed = if history.backoffs > 0 {
            1
        } else {
            policy.max_reverts
        };
        if history.reverts.len() >= allowed {
            history.backoffs += 1;
            let delay = crate::backoff::doubling(
                history.backoffs,
                policy.first_backoff,
                policy.max_backoff,
            );
            let until = now + delay;
            history.until = Some(until);
            history.reverts.clear();
            return fight(history.backoffs, until);
        }
        history.reverts.push_back(now);
        HealVerdict::Heal
    }

    /// Forgets `object` (deleted or no longer managed).
    pub fn forget(&mut self, object: &ObjectRef) {
        self.fields.retain(|(id, _), _| id != object);
    }
}
