//! Prune, after apply: find the app's orphans in the watch caches, let
//! `tether_core::prune::plan_prune` decide their fate, delete what it
//! allows with the app's propagation policy.

use kube::api::{DeleteParams, PropagationPolicy};
use serde_json::{Value, json};
use tether_cluster::{Applier, ClusterError, Resources};
use tether_core::ObjectRef;
use tether_core::prune::{Breaker, KeepReason, PruneDecision, PruneFate, PruneOptions, plan_prune};
use tether_core::tracking::AppRef;

use crate::api::application::{InventoryEntry, PrunePropagation};
use crate::fence::{Fence, Fenced};
use crate::observe::live::LiveCache;

/// Where prune looks and deletes: the watch caches of managed objects, the
/// kinds the API server serves, and the destination's applier.
pub struct Cluster<'a> {
    pub live: &'a LiveCache,
    pub resources: &'a Resources,
    pub applier: &'a Applier,
    /// Checked once before the first deletion: this replica still leads.
    pub fence: Option<&'a Fence>,
}

/// What prune found and did.
#[derive(Debug, Clone, Default)]
pub struct PruneReport {
    /// Every orphan and its fate: deleted, or why it was kept.
    pub orphans: Vec<(ObjectRef, PruneFate)>,
    /// Inventory entries that must stay: orphans kept (or whose deletion
    /// failed), so a later prune can still find them.
    pub kept: Vec<InventoryEntry>,
    /// Set when a circuit breaker stopped every deletion.
    pub breaker: Option<Breaker>,
}

/// Finds and prunes `owner`'s orphans: objects of `inventory` (or labelled
/// as the app's) that are not among `desired`. Deletes only when `options`
/// allow it; a failed deletion keeps the object and is reported as kept.
pub async fn prune(
    cluster: &Cluster<'_>,
    owner: &AppRef,
    inventory: &[InventoryEntry],
    desired: &[ObjectRef],
    options: &PruneOptions,
    propagation: PrunePropagation,
) -> PruneReport {
    let applier = cluster.applier;
    let inventory_ids: Vec<ObjectRef> = inventory.iter().map(InventoryEntry::id).collect();
    let mut live: Vec<(ObjectRef, Value)> = Vec::new();
    for (entry, id) in inventory.iter().zip(&inventory_ids) {
        if desired.contains(id) {
            continue;
        }
        let probe = json!({"apiVersion": entry.api_version(), "kind": entry.kind});
        let Ok(served) = cluster.resources.resolve(id, &probe).await else {
            continue;
        };
        if let Some(object) = cluster.live.get(&served, id).await {
            live.push((
                id.clone(),
                serde_json::to_value(&*object).unwrap_or_default(),
            ));
        }
    }
    for (id, object) in cluster.live.labelled(&owner.label_value()) {
        if !desired.contains(&id) && !live.iter().any(|(found, _)| *found == id) {
            live.push((id, serde_json::to_value(&*object).unwrap_or_default()));
        }
    }
    let pairs: Vec<(ObjectRef, &Value)> = live.iter().map(|(id, o)| (id.clone(), o)).collect();
    let plan = plan_prune(owner, &inventory_ids, desired, &pairs, options);

    let mut report = PruneReport {
        breaker: plan.breaker.clone(),
        ..PruneReport::default()
    };
    let deletes = plan
        .orphans
        .iter()
        .any(|(_, decision)| *decision == PruneDecision::Delete);
    let fenced = match cluster.fence {
        Some(fence) if deletes => fence.check().await.err(),
        _ => None,
    };
    for (id, decision) in &plan.orphans {
        let fate = match decision {
            PruneDecision::Delete => match &fenced {
                Some(fenced) => PruneFate::deletion_failed(DeleteError::Fenced(fenced.clone())),
                None => match delete(applier, id, &live, propagation).await {
                    Ok(()) => PruneFate::Deleted,
                    Err(error) => PruneFate::deletion_failed(error),
                },
            },
            PruneDecision::Keep(reason) => PruneFate::kept(reason),
        };
        let stays_ours = !matches!(
            decision,
            PruneDecision::Keep(KeepReason::NotInInventory | KeepReason::NotTracked)
        );
        if stays_ours
            && !fate.is_deleted()
            && let Some(entry) = inventory.iter().find(|entry| entry.id() == *id)
        {
            report.kept.push(entry.clone());
        }
        report.orphans.push((id.clone(), fate));
    }
    report
}

async fn delete(
    applier: &Applier,
    id: &ObjectRef,
    live: &[(ObjectRef, Value)],
    propagation: PrunePropagation,
) -> Result<(), DeleteError> {
    let object = live
        .iter()
        .find(|(found, _)| found == id)
        .map(|(_, object)| object)
        .ok_or_else(|| DeleteError::NotCached { object: id.clone() })?;
    let api = applier.api_for(id, object).await?;
    let params = DeleteParams {
        propagation_policy: Some(match propagation {
            PrunePropagation::Foreground => PropagationPolicy::Foreground,
            PrunePropagation::Background => PropagationPolicy::Background,
            PrunePropagation::Orphan => PropagationPolicy::Orphan,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&id.name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(ClusterError::Request {
            object: id.clone(),
            step: "delete",
            error,
        }
        .into()),
    }
}

/// Why an orphan could not be deleted; it is kept.
#[derive(Debug, thiserror::Error)]
enum DeleteError {
    #[error("{object}: no longer in the watch cache")]
    NotCached { object: ObjectRef },
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Fenced(Fenced),
}
