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

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;
use tether_cluster::{Applier, ClusterError};
use tether_core::order::{BadSyncWave, apply_position};
use tether_core::tracking::{AppRef, stamp};
use tether_core::{Action, ObjectRef};
use tether_source::Manifest;

const CRD_ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(60);

/// What a sync did, object by object, in apply order.
#[derive(Debug, Default, Clone)]
pub struct SyncReport {
    pub results: Vec<(ObjectRef, Action)>,
    /// Each applied object as sent (with tracking marks) and as returned.
    pub applied: Vec<AppliedObject>,
}

/// One applied object: what was sent and what the API server returned.
#[derive(Debug, Clone)]
pub struct AppliedObject {
    pub id: ObjectRef,
    pub sent: Value,
    pub live: Value,
}

impl SyncReport {
    /// How many objects ended with `action`.
    pub fn count(&self, action: Action) -> usize {
        self.results.iter().filter(|(_, a)| *a == action).count()
    }
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
    #[error("validation failed, nothing applied: {0}")]
    Validate(ClusterError),
    #[error("apply failed: {0}")]
    Apply(ClusterError),
    /// Some objects were applied before one failed: live state is part
    /// new revision, part old.
    #[error("apply stopped half-way after {} object(s): {source}", applied.len())]
    HalfWay {
        source: ClusterError,
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
            other => other,
        }
    }

    /// The objects applied before the failure (empty unless half-way).
    pub fn applied(&self) -> &[(ObjectRef, Action)] {
        match self {
            SyncError::HalfWay { applied, .. } => applied,
            _ => &[],
        }
    }
}

/// Validates `manifests` by dry-run and applies them for `app`, in apply
/// order, waiting for each CRD to be established before its instances.
pub async fn sync_manifests(
    applier: &Applier,
    app: &AppRef,
    manifests: &[Manifest],
) -> Result<SyncReport, SyncError> {
    let planned = plan(applier, app, manifests).await?;
    let deferred = deferred_until_foundations(&planned);
    let (foundations, rest): (Vec<_>, Vec<_>) =
        planned.iter().partition(|(id, _)| is_foundation(id));

    // Validate everything the API server can judge now.
    for (index, (_, object)) in planned.iter().enumerate() {
        if !deferred[index] {
            applier
                .apply(object, true)
                .await
                .map_err(SyncError::Validate)?;
        }
    }

    // Apply the foundations, then validate what depended on them.
    let mut report = SyncReport::default();
    for (id, object) in foundations {
        if let Err(error) = apply_one(applier, id, object, &mut report).await {
            return Err(error.after(&report));
        }
    }
    for (index, (_, object)) in planned.iter().enumerate() {
        if deferred[index] {
            applier
                .apply(object, true)
                .await
                .map_err(SyncError::Validate)?;
        }
    }

    // Apply the rest, in order.
    for (id, object) in rest {
        if let Err(error) = apply_one(applier, id, object, &mut report).await {
            return Err(error.after(&report));
        }
    }
    Ok(report)
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
        report
            .results
            .push((applied.object.clone(), applied.action));
        report.applied.push(AppliedObject {
            id: applied.object,
            sent: object,
            live: applied.live,
        });
    }
    Ok(report)
}

async fn apply_one(
    applier: &Applier,
    id: &ObjectRef,
    object: &Value,
    report: &mut SyncReport,
) -> Result<(), SyncError> {
    let applied = applier
        .apply(object, false)
        .await
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
    report
        .results
        .push((applied.object.clone(), applied.action));
    report.applied.push(AppliedObject {
        id: applied.object,
        sent: object.clone(),
        live: applied.live,
    });
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
