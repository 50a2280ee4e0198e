//! One sync: validate everything, then apply everything, in order.
//!
//! A commit with one invalid object applies nothing: every object is first
//! applied as a server-side dry-run, and only when all pass is anything
//! written. The API server cannot judge two kinds of object before their
//! foundations exist: custom resources whose CustomResourceDefinition is in
//! the same set, and objects in a Namespace the same set creates. So a sync
//! runs in two rounds: validate everything else, apply the foundations
//! (Namespaces, then CRDs, waiting until established), validate the
//! deferred objects, and only then apply the rest. A bad deferred object
//! thus leaves at most new, empty Namespaces and CRDs behind.
//!
//! The rest goes wave by wave (`tether.dev/sync-wave`); with a
//! [`WaveGate`] each wave waits until the one before it is healthy.
//!
//! The reconcile hands over its comparison ([`SyncOptions::compared`]), so a
//! sync costs requests only for what changed: the comparison's dry-run
//! already validated every object it compared, objects in sync are not sent
//! again, and the rest are applied over the resourceVersion the watch cache
//! had — one request each. A commit changing one object of fifty is one
//! apply, not fifty dry-runs, fifty reads and fifty applies.

pub mod hooks;
pub mod preview;
pub mod prune;
pub mod waves;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Duration;

use serde_json::Value;
use tether_cluster::{Applied, Applier, ClusterError};
use tether_core::order::{BadSyncWave, apply_position, sync_wave};
use tether_core::tracking::{AppRef, stamp};
use tether_core::{Action, Initiator, ObjectRef};
use tether_source::Manifest;
use tokio::sync::watch;

use crate::fence::Fence;
use crate::observe::compare::{Compared, ObjectState};
pub use crate::observe::memo::AppliedObject;
use waves::WaveGate;

const CRD_ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(60);

/// What a sync did, object by object, in apply order.
#[derive(Debug, Default, Clone)]
pub struct SyncReport {
    pub results: Vec<(ObjectRef, Action)>,
    /// Each object as sent (with tracking marks) and as the API server
    /// returned it, or, when it was already in sync and not sent, as the
    /// watch cache had it.
    pub applied: Vec<AppliedObject>,
}

impl SyncReport {
    /// Records an object sent and what the API server made of it.
    fn record(&mut self, sent: Value, applied: Applied) {
        self.results.push((applied.object.clone(), applied.action));
        self.applied.push(AppliedObject {
            id: applied.object,
            sent,
            live: applied.live,
        });
    }

    /// Records an object already in sync, not sent: live as cached.
    fn keep(&mut self, id: &ObjectRef, object: &Value, live: &Value) {
        self.results.push((id.clone(), Action::Unchanged));
        self.applied.push(AppliedObject {
            id: id.clone(),
            sent: object.clone(),
            live: live.clone(),
        });
    }

    /// How many objects ended with `action`.
    pub fn count(&self, action: Action) -> usize {
        self.results.iter().filter(|(_, a)| *a == action).count()
    }
}

/// A sync a reconcile ran: who started it, when, and how it ended.
pub struct Ran {
    pub initiator: Initiator,
    pub started_at: String,
    pub result: Result<SyncReport, SyncError>,
    /// The sync hooks it ran (or runs), in order.
    pub hooks: Vec<crate::api::application::HookRun>,
}

/// Why a sync stopped. Validation errors mean nothing was applied.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("{object}: {source}")]
    Order {
        object: ObjectRef,
        #[source]
        source: BadSyncWave,
    },
    /// The destination namespace could not be created
    /// (`syncPolicy.createNamespace`); nothing applied.
    #[error("creating the destination namespace failed, nothing applied: {0}")]
    Namespace(ClusterError),
    #[error("validation failed, nothing applied: {0}")]
    Validate(ClusterError),
    /// This replica lost the Lease before a wave: the waves before it
    /// were applied, the rest are left to the leader.
    #[error("stopped before wave {wave}: {fenced}")]
    Fenced {
        wave: i32,
        fenced: crate::fence::Fenced,
        applied: Vec<(ObjectRef, Action)>,
    },
    #[error("apply failed: {0}")]
    Apply(ClusterError),
    /// Some objects were applied before one failed: live state is part
    /// new revision, part old.
    #[error("apply stopped half-way after {} object(s): {source}", applied.len())]
    HalfWay {
        source: ClusterError,
        applied: Vec<(ObjectRef, Action)>,
    },
    #[error(
        "{object}: not healthy after {}s, so the waves after wave {wave} were not applied: {message}",
        waited.as_secs()
    )]
    Unhealthy {
        object: ObjectRef,
        wave: i32,
        waited: Duration,
        message: String,
    },
    /// A hook failed (or did not finish in time): with a PreSync hook,
    /// nothing else was applied.
    #[error("{phase} hook {hook} failed{}: {message}", if applied.is_empty() { ", nothing else applied" } else { "" })]
    Hook {
        phase: tether_core::hook::HookPhase,
        hook: String,
        message: String,
        applied: Vec<(ObjectRef, Action)>,
    },
    /// An object the sync applied did not become Healthy within
    /// `waveTimeoutSeconds`, so the PostSync hooks did not run.
    #[error(
        "{object}: not healthy after {}s, so the PostSync hooks did not run: {message}",
        waited.as_secs()
    )]
    PostSyncBlocked {
        object: ObjectRef,
        waited: Duration,
        message: String,
        applied: Vec<(ObjectRef, Action)>,
    },
    /// A hook is still running: the sync yields its worker and resumes at
    /// the next reconcile (not a failure).
    #[error("waiting for {phase} hook {hook}: {message}")]
    HookRunning {
        phase: tether_core::hook::HookPhase,
        hook: String,
        message: String,
        /// When the hook was created.
        since: std::time::SystemTime,
        applied: Vec<(ObjectRef, Action)>,
    },
    /// Wave `wave` is not healthy yet: the sync yields its worker and
    /// resumes at the next reconcile (not a failure).
    #[error("waiting for wave {wave} to be healthy before the next: {object}: {message}")]
    Waiting {
        object: ObjectRef,
        wave: i32,
        message: String,
        /// When the wait for this wave began.
        since: std::time::SystemTime,
        applied: Vec<(ObjectRef, Action)>,
    },
}

impl SyncError {
    /// This error, knowing what `report` had applied before it.
    fn after(self, report: &SyncReport) -> SyncError {
        match self {
            SyncError::Apply(source) if !report.results.is_empty() => SyncError::HalfWay {
                source,
                applied: report.results.clone(),
            },
            other => other.waiting_after(report),
        }
    }

    /// This error, a wait for a wave knowing what `report` had applied
    /// before it (the wave gate does not know).
    pub(crate) fn waiting_after(self, report: &SyncReport) -> SyncError {
        match self {
            SyncError::Waiting {
                object,
                wave,
                message,
                since,
                ..
            } => SyncError::Waiting {
                object,
                wave,
                message,
                since,
                applied: report.results.clone(),
            },
            other => other,
        }
    }

    /// Whether the sync only yields, waiting for a wave, to resume later.
    pub fn is_waiting(&self) -> bool {
        matches!(
            self,
            SyncError::Waiting { .. } | SyncError::HookRunning { .. }
        )
    }

    /// The objects applied before the failure (empty unless half-way).
    pub fn applied(&self) -> &[(ObjectRef, Action)] {
        match self {
            SyncError::HalfWay { applied, .. }
            | SyncError::Fenced { applied, .. }
            | SyncError::Hook { applied, .. }
            | SyncError::PostSyncBlocked { applied, .. }
            | SyncError::HookRunning { applied, .. }
            | SyncError::Waiting { applied, .. } => applied,
            _ => &[],
        }
    }
}

/// How far a sync has got, for `tether sync` to show while it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    pub applied: usize,
    pub total: usize,
    pub wave: i32,
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "applied {}/{} objects (wave {})",
            self.applied, self.total, self.wave
        )
    }
}

/// What a sync does besides applying; by default, nothing.
#[derive(Default)]
pub struct SyncOptions<'a> {
    /// Wait for each wave to be healthy before applying the next.
    pub gate: Option<&'a WaveGate<'a>>,
    /// Told after every object applied.
    pub progress: Option<&'a watch::Sender<Progress>>,
    /// Checked before each wave: this replica still leads.
    pub fence: Option<&'a Fence>,
    /// The reconcile's comparison of these very objects with live state.
    /// An object it compared by dry-run is already validated; one in sync
    /// is not applied again (its report says Unchanged); the others are
    /// applied over the resourceVersion it saw, without reading them first.
    /// Empty: validate, read and apply everything.
    pub compared: &'a [Compared],
}

/// Validates `manifests` by dry-run and applies them for `app`, in apply
/// order, waiting for each CRD to be established before its instances.
pub async fn sync_manifests(
    applier: &Applier,
    app: &AppRef,
    manifests: &[Manifest],
) -> Result<SyncReport, SyncError> {
    sync_manifests_with(applier, app, manifests, &SyncOptions::default()).await
}

/// [`sync_manifests`], waiting between waves and reporting progress as
/// `options` ask.
pub async fn sync_manifests_with(
    applier: &Applier,
    app: &AppRef,
    manifests: &[Manifest],
    options: &SyncOptions<'_>,
) -> Result<SyncReport, SyncError> {
    let planned = plan(applier, app, manifests).await?;
    let deferred = deferred_until_foundations(&planned);
    let (foundations, rest): (Vec<_>, Vec<_>) =
        planned.iter().partition(|(id, _)| is_foundation(id));
    let prior = Prior::of(options.compared);

    // Validate everything the API server can judge now (and the
    // comparison has not judged already).
    for (index, (id, object)) in planned.iter().enumerate() {
        if !deferred[index] && !prior.validated(id, object) {
            applier.dry_run(object).await.map_err(SyncError::Validate)?;
        }
    }

    // Apply the foundations, then validate what depended on them.
    let mut report = SyncReport::default();
    let told = |report: &SyncReport, wave| {
        if let Some(progress) = options.progress {
            progress.send_replace(Progress {
                applied: report.results.len(),
                total: planned.len(),
                wave,
            });
        }
    };
    let fence = async |wave, report: &SyncReport| match options.fence {
        Some(fence) => fence.check().await.map_err(|fenced| SyncError::Fenced {
            wave,
            fenced,
            applied: report.results.clone(),
        }),
        None => Ok(()),
    };
    if !foundations.is_empty() {
        fence(0, &report).await?;
    }
    for (id, object) in foundations {
        if let Err(error) = apply_one(applier, &prior, id, object, &mut report).await {
            return Err(error.after(&report));
        }
        told(&report, 0);
    }
    for (index, (_, object)) in planned.iter().enumerate() {
        if deferred[index] {
            applier.dry_run(object).await.map_err(SyncError::Validate)?;
        }
    }

    // Apply the rest, wave by wave, each after the one before is healthy
    // when gated.
    let mut previous: Option<(i32, usize)> = None;
    for (wave, objects) in waves(&rest) {
        if let (Some(gate), Some((done, start))) = (options.gate, previous) {
            gate.wait(done, &report.applied[start..])
                .await
                .map_err(|error| error.after(&report))?;
        }
        fence(wave, &report).await?;
        previous = Some((wave, report.applied.len()));
        for (id, object) in objects {
            if let Err(error) = apply_one(applier, &prior, id, object, &mut report).await {
                return Err(error.after(&report));
            }
            told(&report, wave);
        }
    }
    Ok(report)
}

/// `planned` (in apply order) cut into its sync waves, in order.
fn waves<'a>(planned: &[&'a (ObjectRef, Value)]) -> Vec<(i32, Vec<&'a (ObjectRef, Value)>)> {
    let mut waves: Vec<(i32, Vec<&(ObjectRef, Value)>)> = Vec::new();
    for entry in planned {
        // Every wave annotation was read when the set was planned.
        let wave = sync_wave(&entry.1).unwrap_or_default();
        match waves.last_mut() {
            Some((last, objects)) if *last == wave => objects.push(entry),
            _ => waves.push((wave, vec![entry])),
        }
    }
    waves
}

/// Re-applies `manifests` for `app` to revert drift, in apply order and
/// without validating first: their desired state is unchanged since it
/// passed validation, and `live_versions` (from the watch cache) says what
/// each object was, so each object costs exactly one request.
pub async fn reapply(
    applier: &Applier,
    app: &AppRef,
    manifests: &[Manifest],
    live_versions: &[(ObjectRef, String)],
) -> Result<SyncReport, SyncError> {
    let mut report = SyncReport::default();
    for (id, object) in plan(applier, app, manifests).await? {
        let known = live_versions
            .iter()
            .find(|(live, _)| *live == id)
            .map(|(_, version)| version.as_str());
        let applied = applier
            .apply_over(&object, known)
            .await
            .map_err(SyncError::Apply)?;
        tracing::info!(object = %applied.object, action = %applied.action, "re-applied");
        report.record(object, applied);
    }
    Ok(report)
}

/// The comparison's findings, by object, for the objects sent as compared.
struct Prior<'a>(HashMap<&'a ObjectRef, &'a Compared>);

impl<'a> Prior<'a> {
    fn of(compared: &'a [Compared]) -> Prior<'a> {
        Prior(compared.iter().map(|c| (&c.id, c)).collect())
    }

    /// The comparison of `object` as it is about to be sent, if any.
    fn of_object(&self, id: &ObjectRef, object: &Value) -> Option<&'a Compared> {
        self.0.get(id).copied().filter(|c| c.desired == *object)
    }

    /// Whether the comparison's dry-run already accepted `object`.
    fn validated(&self, id: &ObjectRef, object: &Value) -> bool {
        self.of_object(id, object)
            .is_some_and(|c| matches!(c.state, ObjectState::InSync | ObjectState::Differs(_)))
    }
}

async fn apply_one(
    applier: &Applier,
    prior: &Prior<'_>,
    id: &ObjectRef,
    object: &Value,
    report: &mut SyncReport,
) -> Result<(), SyncError> {
    let compared = prior.of_object(id, object);
    if let Some(Compared {
        live: Some(live),
        state: ObjectState::InSync,
        ..
    }) = compared
    {
        report.keep(id, object, live);
        return Ok(());
    }
    let applied = match compared {
        Some(compared) => {
            let version = compared
                .live
                .as_ref()
                .and_then(|live| live.pointer("/metadata/resourceVersion")?.as_str());
            applier.apply_over(object, version).await
        }
        None => applier.apply(object, false).await,
    }
    .map_err(SyncError::Apply)?;
    if id.kind == "CustomResourceDefinition" {
        tether_cluster::wait::crd_established(
            applier.resources().client().clone(),
            &id.name,
            CRD_ESTABLISHED_TIMEOUT,
        )
        .await
        .map_err(SyncError::Apply)?;
    }
    tracing::info!(object = %applied.object, action = %applied.action, "applied");
    report.record(object.clone(), applied);
    Ok(())
}

fn is_foundation(id: &ObjectRef) -> bool {
    id.group.is_empty() && id.kind == "Namespace"
        || id.group == "apiextensions.k8s.io" && id.kind == "CustomResourceDefinition"
}

/// Which planned objects cannot be validated until the set's Namespaces
/// and CRDs exist: instances of those CRDs, and objects in those Namespaces.
fn deferred_until_foundations(planned: &[(ObjectRef, Value)]) -> Vec<bool> {
    let crd_kinds = crd_kinds(planned);
    let namespaces: HashSet<&str> = planned
        .iter()
        .filter(|(id, _)| id.group.is_empty() && id.kind == "Namespace")
        .map(|(id, _)| id.name.as_str())
        .collect();
    planned
        .iter()
        .map(|(id, _)| {
            crd_kinds.contains(&group_kind(id))
                || id
                    .namespace
                    .as_deref()
                    .is_some_and(|ns| namespaces.contains(ns))
        })
        .collect()
}

/// Stamps each manifest with the app's tracking marks and sorts the set
/// into apply order. Kinds defined by a CRD in the set cannot be resolved
/// yet, so they keep their declared identity.
async fn plan(
    applier: &Applier,
    app: &AppRef,
    manifests: &[Manifest],
) -> Result<Vec<(ObjectRef, Value)>, SyncError> {
    let defined_here: HashSet<(String, String)> =
        manifests.iter().filter_map(crd_defines).collect();
    let mut planned = Vec::with_capacity(manifests.len());
    for manifest in manifests {
        let id = if defined_here.contains(&group_kind(&manifest.id)) {
            manifest.id.clone()
        } else {
            applier
                .identify(&manifest.object)
                .await
                .map_err(SyncError::Validate)?
        };
        let mut object = manifest.object.clone();
        stamp(&mut object, app, &id);
        let position = apply_position(&id, &object).map_err(|source| SyncError::Order {
            object: id.clone(),
            source,
        })?;
        planned.push((position, id, object));
    }
    planned.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(planned
        .into_iter()
        .map(|(_, id, object)| (id, object))
        .collect())
}

fn crd_kinds(planned: &[(ObjectRef, Value)]) -> HashSet<(String, String)> {
    planned
        .iter()
        .filter(|(id, _)| id.kind == "CustomResourceDefinition")
        .filter_map(|(_, object)| crd_group_kind(object))
        .collect()
}

fn crd_defines(manifest: &Manifest) -> Option<(String, String)> {
    (manifest.id.kind == "CustomResourceDefinition")
        .then(|| crd_group_kind(&manifest.object))
        .flatten()
}

fn crd_group_kind(crd: &Value) -> Option<(String, String)> {
    Some((
        crd.pointer("/spec/group")?.as_str()?.to_string(),
        crd.pointer("/spec/names/kind")?.as_str()?.to_string(),
    ))
}

fn group_kind(id: &ObjectRef) -> (String, String) {
    (id.group.clone(), id.kind.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn planned(name: &str, wave: Option<&str>) -> (ObjectRef, Value) {
        let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop"}});
        if let Some(wave) = wave {
            object["metadata"]["annotations"] =
                json!({ tether_core::order::SYNC_WAVE_ANNOTATION: wave });
        }
        (ObjectRef::from_object(&object).unwrap(), object)
    }

    #[test]
    fn objects_in_apply_order_are_cut_into_waves() {
        let set = [
            planned("a", Some("-1")),
            planned("b", None),
            planned("c", Some("0")),
            planned("d", Some("2")),
        ];
        let refs: Vec<&(ObjectRef, Value)> = set.iter().collect();
        let cut: Vec<(i32, Vec<&str>)> = waves(&refs)
            .into_iter()
            .map(|(wave, objects)| (wave, objects.iter().map(|o| o.0.name.as_str()).collect()))
            .collect();
        assert_eq!(cut, [(-1, vec!["a"]), (0, vec!["b", "c"]), (2, vec!["d"])]);
    }
}
