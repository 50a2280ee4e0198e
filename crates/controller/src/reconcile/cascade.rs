//! Deleting an Application with its objects: the `tether.dev/cascade`
//! finalizer (`tether app delete --cascade`, or set in the Application's
//! YAML), as Argo CD's `resources-finalizer.argocd.argoproj.io`.
//!
//! An Application being deleted is never synced again. With the finalizer,
//! its objects are deleted with the same ownership proof prune uses
//! ([`tether_core::prune::plan_prune`] with nothing desired): in its
//! inventory *and* carrying its tracking label and annotation, not opted
//! out, not adopted unless `pruneAdopted`. A namespace made for
//! `createNamespace` is not the app's and stays. Once none of them is left
//! the finalizer is removed and the API server deletes the Application.
//! Objects that could not be deleted keep the finalizer, and say why in an
//! event, until they can (or someone removes the finalizer by hand).

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action as Next;
use kube::runtime::events::EventType;
use serde_json::json;
use tether_core::notice::EventReason;
use tether_core::prune::{PruneFate, PruneOptions};

use super::{Pass, ReconcileError};
use crate::api::StoredApplication;
use crate::api::application::CASCADE_FINALIZER;
use crate::report::events::publish;
use crate::report::status::Step;
use crate::sync::prune::prune;

/// How soon to look again while deleted objects are going away.
const WAIT_FOR_GONE: Duration = Duration::from_secs(1);
/// How soon to try again after a deletion failed.
const RETRY_FAILED: Duration = Duration::from_secs(10);

/// Whether the stored Application is being deleted and carries the
/// cascade finalizer.
pub fn cascades(stored: &StoredApplication) -> bool {
    stored.metadata.deletion_timestamp.is_some()
        && stored
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == CASCADE_FINALIZER)
}

/// Deletes what the app owns; removes the finalizer once nothing is left.
pub async fn delete(pass: &Pass<'_>) -> Result<Next, ReconcileError> {
    // Its objects are not known to be gone while their cluster is away.
    if let Err(away) = pass.target.reachable() {
        return pass.fail(Step::Cluster, away).await;
    }
    let app = &pass.app;
    let policy = &app.spec.sync_policy;
    let inventory = app.inventory();
    // Prune with nothing desired: every object the app provably owns.
    let options = PruneOptions {
        prune: true,
        max_share: 1.0,
        allow_mass_prune: true,
        prune_adopted: policy.prune_adopted,
    };
    let cluster = pass.prune_cluster();
    let propagation = policy.prune_propagation.unwrap_or_default();
    let report = prune(&cluster, &pass.owner, inventory, &[], &options, propagation).await;

    let deleted = report
        .orphans
        .iter()
        .filter(|(_, f)| f.is_deleted())
        .count();
    let failed: Vec<String> = report
        .orphans
        .iter()
        .filter_map(|(id, fate)| match fate {
            PruneFate::Kept(why) if why.starts_with("deletion failed") => {
                Some(format!("{id}: {why}"))
            }
            _ => None,
        })
        .collect();
    // Say how far deleting got, and look again.
    let (type_, reason, note, again) = if !failed.is_empty() {
        let note = format!(
            "deleting the app's objects: {} could not be deleted: {}",
            failed.len(),
            failed.join("; ")
        );
        tracing::warn!(app = %pass.owner.label_value(), %note);
        (
            EventType::Warning,
            EventReason::CascadeFailed,
            note,
            RETRY_FAILED,
        )
    } else if deleted > 0 {
        let kept = report.orphans.len() - deleted;
        let note = format!("deleted {deleted} object(s) of the app; kept {kept} it does not own");
        (
            EventType::Normal,
            EventReason::CascadeDeleting,
            note,
            WAIT_FOR_GONE,
        )
    } else {
        // Nothing of the app's is left: let the Application go.
        remove_finalizer(pass).await?;
        return Ok(Next::await_change());
    };
    publish(&pass.ctx.recorder, app, type_, reason, note).await;
    Ok(Next::requeue(again))
}

/// Removes [`CASCADE_FINALIZER`], keeping any other finalizer; refused
/// (and retried) if the Application changed meanwhile.
async fn remove_finalizer(pass: &Pass<'_>) -> Result<(), ReconcileError> {
    let (namespace, name) = &pass.key;
    let metadata = &pass.app.metadata;
    let rest: Vec<&String> = metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != CASCADE_FINALIZER)
        .collect();
    let patch = json!({"metadata": {
        "finalizers": rest,
        "resourceVersion": metadata.resource_version,
    }});
    let api: Api<StoredApplication> = Api::namespaced(pass.ctx.client.clone(), namespace);
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(ReconcileError::Finalizer {
            app: format!("{namespace}/{name}"),
            error,
        }),
    }
}
