//! Observe and diff: pair each desired object with its live copy from the
//! watch cache and compare them with server-side-apply semantics.
//!
//! The desired side of the comparison is what a server-side dry-run apply
//! returns — live state with Git's fields applied over it — so server
//! defaults and fields other writers own (that Git does not mention) are
//! never drift. The dry-run is skipped while neither the desired object nor
//! the live object's resourceVersion changed since the last comparison, so a
//! steady state makes no API requests. When only live changed, the last
//! prediction is reused: Git's fields, as the server stored them, compared
//! with live — trusted when every difference was written by another field
//! manager (a `kubectl scale`, an edit), so noticing drift costs no request.

use std::sync::Mutex;

use serde_json::Value;
use tether_cluster::{Applier, ClusterError};
use tether_core::ObjectRef;
use tether_core::attribution::Ownership;
use tether_core::diff::{Diff, IgnoreRule, SecretMask, diff, diff_manifest};
use tether_core::generated::generate_name;
use tether_core::ownership;
use tether_core::tracking::{AppRef, FIELD_MANAGER, stamp};
use tether_source::Manifest;

use tether_cluster::Resources;

use super::live::LiveCache;
use super::memo::{AppMemo, Prediction, hash_object};

/// One desired object and what the cluster has.
#[derive(Debug, Clone)]
pub struct Compared {
    pub id: ObjectRef,
    /// The desired object with Tether's tracking marks.
    pub desired: Value,
    /// The live object, if it exists.
    pub live: Option<Value>,
    pub state: ObjectState,
}

/// How one object compares.
#[derive(Debug, Clone)]
pub enum ObjectState {
    /// Live matches Git.
    InSync,
    /// Live differs from Git in these fields.
    Differs(Diff),
    /// Desired but absent.
    Missing,
    /// No comparison could be made (the API server rejected the dry-run,
    /// or managedFields could not be read); the reason names the object.
    Uncomparable(String),
}

impl ObjectState {
    /// In sync when `diff` is empty; else differing in it.
    fn of(diff: Diff) -> ObjectState {
        if diff.is_empty() {
            ObjectState::InSync
        } else {
            ObjectState::Differs(diff)
        }
    }
}

impl Compared {
    pub fn in_sync(&self) -> bool {
        matches!(self.state, ObjectState::InSync)
    }

    /// Whether `manifest` declares this object (its namespace may have
    /// been left to the destination's default).
    pub fn desired_matches(&self, manifest: &Manifest) -> bool {
        let declared = &manifest.id;
        declared.group == self.id.group
            && declared.kind == self.id.kind
            && declared.name == self.id.name
            && (declared.namespace.is_none() || declared.namespace == self.id.namespace)
    }
}

/// What a comparison reads: the watch caches of managed objects, the kinds
/// the API server serves, and how Secret values are masked in diffs.
pub struct Observer<'a> {
    pub live: &'a LiveCache,
    pub resources: &'a Resources,
    pub mask: SecretMask<'a>,
}

/// Compares every desired object of `app` with the live cluster.
pub async fn compare_all(
    ctx: &Observer<'_>,
    applier: &Applier,
    app: &AppRef,
    manifests: &[Manifest],
    ignore: &[IgnoreRule],
    memo: &Mutex<AppMemo>,
) -> Result<Vec<Compared>, ClusterError> {
    let mut compared = Vec::with_capacity(manifests.len());
    for manifest in manifests {
        compared.push(compare_one(ctx, applier, app, manifest, ignore, memo).await?);
    }
    Ok(compared)
}

async fn compare_one(
    ctx: &Observer<'_>,
    applier: &Applier,
    app: &AppRef,
    manifest: &Manifest,
    ignore: &[IgnoreRule],
    memo: &Mutex<AppMemo>,
) -> Result<Compared, ClusterError> {
    let pair = match observe(ctx, applier, app, manifest).await? {
        Observed::Live(pair) => pair,
        Observed::Missing(id, desired) => return Ok(missing(id, desired)),
    };
    let state = match known_diff(&pair, ignore, ctx.mask, memo) {
        Some(diff) => ObjectState::of(diff),
        None => dry_run(&pair, applier, ignore, ctx.mask, memo).await?,
    };
    Ok(Compared {
        id: pair.id,
        desired: pair.desired,
        live: Some(pair.live),
        state,
    })
}

/// A desired object, stamped for its app, and its live copy.
struct Pair {
    id: ObjectRef,
    desired: Value,
    desired_hash: u64,
    live: Value,
    live_version: String,
}

/// What the cluster has of one desired object.
enum Observed {
    Live(Pair),
    /// No live copy to compare with: the desired object (stamped where
    /// its identity is known).
    Missing(ObjectRef, Value),
}

/// Pairs `manifest`, stamped for `app`, with its live copy from the watch
/// cache.
async fn observe(
    ctx: &Observer<'_>,
    applier: &Applier,
    app: &AppRef,
    manifest: &Manifest,
) -> Result<Observed, ClusterError> {
    // A kind the API server does not serve yet (its CRD is in this very
    // commit) has no live object: it is missing until synced.
    let served = match ctx.resources.resolve(&manifest.id, &manifest.object).await {
        Ok(served) => served,
        Err(ClusterError::UnknownKind { .. }) => {
            return Ok(Observed::Missing(
                manifest.id.clone(),
                manifest.object.clone(),
            ));
        }
        Err(error) => return Err(error),
    };
    let id = applier.identify(&manifest.object).await?;
    let mut desired = manifest.object.clone();
    stamp(&mut desired, app, &id);
    // An object the API server names that was not created yet has no live
    // copy to look for (`crate::reconcile::generated`).
    if generate_name(&desired).is_some() {
        return Ok(Observed::Missing(id, desired));
    }
    let Some(live) = ctx.live.get(&served, &id).await else {
        return Ok(Observed::Missing(id, desired));
    };
    let live_version = live.metadata.resource_version.clone().unwrap_or_default();
    let live = serde_json::to_value(&*live).unwrap_or(Value::Null);
    // An adopted object keeps its mark: the mark is Tether's own field.
    if ownership::is_adopted(&live) {
        ownership::mark_adopted(&mut desired);
    }
    Ok(Observed::Live(Pair {
        id,
        desired_hash: hash_object(&desired),
        desired,
        live,
        live_version,
    }))
}

/// The diff of `pair` known without a request: the last one while
/// neither side changed; when only live changed, the last dry run's
/// prediction compared with live, trusted (and remembered) when every
/// difference is another writer's.
fn known_diff(
    pair: &Pair,
    ignore: &[IgnoreRule],
    mask: SecretMask<'_>,
    memo: &Mutex<AppMemo>,
) -> Option<Diff> {
    let mut memo = memo.lock().expect("lock");
    if let Some(diff) = memo.reuse(&pair.id, pair.desired_hash, &pair.live_version) {
        return Some(diff);
    }
    let predicted = memo.predicted(&pair.id, pair.desired_hash)?;
    let diff = foreign_change(predicted.wanted(&pair.desired), &pair.live, ignore, mask)?;
    memo.remember(
        &pair.id,
        pair.desired_hash,
        &pair.live_version,
        diff.clone(),
        None,
    );
    Some(diff)
}

/// Dry-runs `pair`'s desired object and compares the prediction with
/// live, remembering both. Uncomparable when the API server refuses the
/// object for good or the diff cannot be read; a retryable error is
/// returned.
async fn dry_run(
    pair: &Pair,
    applier: &Applier,
    ignore: &[IgnoreRule],
    mask: SecretMask<'_>,
    memo: &Mutex<AppMemo>,
) -> Result<ObjectState, ClusterError> {
    let predicted = match applier.dry_run(&pair.desired).await {
        Ok(predicted) => predicted,
        Err(error) if !error.is_retryable() => {
            return Ok(ObjectState::Uncomparable(error.to_string()));
        }
        Err(error) => return Err(error),
    };
    let diff = match diff(&predicted, &pair.live, ignore, mask) {
        Ok(diff) => diff,
        Err(error) => {
            return Ok(ObjectState::Uncomparable(format!("{}: {error}", pair.id)));
        }
    };
    memo.lock().expect("lock").remember(
        &pair.id,
        pair.desired_hash,
        &pair.live_version,
        diff.clone(),
        Some(Prediction::of(&pair.desired, &predicted)),
    );
    Ok(ObjectState::of(diff))
}

/// The diff of `live` against Git's fields as the server last predicted
/// them (`wanted`), when it can be trusted without a new dry-run: nothing
/// differs, or every difference was last written by a manager other than
/// Tether.
fn foreign_change(
    wanted: &Value,
    live: &Value,
    ignore: &[IgnoreRule],
    mask: SecretMask<'_>,
) -> Option<Diff> {
    let diff = diff_manifest(wanted, live, ignore, FIELD_MANAGER, mask).ok()?;
    let ownership = Ownership::of(live).ok()?;
    let foreign = ownership
        .attribute(&diff)
        .iter()
        .all(|(_, writer)| writer.as_ref().is_some_and(|w| w.manager != FIELD_MANAGER));
    foreign.then_some(diff)
}

fn missing(id: ObjectRef, desired: Value) -> Compared {
    Compared {
        id,
        desired,
        live: None,
        state: ObjectState::Missing,
    }
}
