//! Apply: a full sync for a new revision (when automated) or a `tether
//! sync`, else a re-apply of only what self-heal reverts; then prune.

use std::time::Instant;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;
use tether_cluster::ClusterError;
use tether_core::tracking::FIELD_MANAGER;

use kube::ResourceExt;
use kube::runtime::events::EventType;
use tether_core::drift::DriftKind;
use tether_core::notice::EventReason;
use tether_core::prune::PruneOptions;
use tether_core::revision::RevisionChange;
use tether_core::{Initiator, ObjectRef, OperationPhase};
use tether_source::{Manifest, Rendered};

use super::Pass;
use super::hooks::{self, Hooks};
use super::operation::{all_healthy, mark_running, resumed_operation, sync_operation};
use super::report::now;
use crate::api::application::{
    ALLOW_MASS_PRUNE_ANNOTATION, CREATED_FOR_ANNOTATION, MANAGED_BY_LABEL, SYNC_REQUEST_ANNOTATION,
};
use crate::observe::compare::Compared;
use crate::observe::drift::{Assessed, Response};
use crate::observe::memo::Awaited;
use crate::report::events::publish;
use crate::sync::prune::{PruneReport, prune as prune_orphans};
use crate::sync::{Ran, SyncError, reapply};
use tether_core::hook::HookPhase;

/// Syncs everything for a new revision (when automated) or an explicit
/// `tether sync`; otherwise re-applies only the objects self-heal reverts.
/// `None` when nothing was applied.
pub async fn sync(
    pass: &Pass<'_>,
    desired: &Rendered,
    compared: &[Compared],
    drift: &[Assessed],
    change: RevisionChange,
    hooks: &Hooks,
) -> Option<Ran> {
    let app = &pass.app;
    let policy = &app.spec.sync_policy;
    let requested = app.annotations().contains_key(SYNC_REQUEST_ANNOTATION);
    let heal: Vec<&Assessed> = drift
        .iter()
        .filter(|d| d.response == Response::Heal)
        .collect();
    // Inside a deny window (or outside every allow window) nothing runs
    // on its own; a `tether sync` got here only if a window lets it.
    let automated = policy.automated && super::schedule::automated(pass.sync_window());
    // A rollback's pin applies its revision at once, automated or not.
    let pinned = pass.pin_holds();
    let everything = requested || change == RevisionChange::New && (automated || pinned);
    if !everything && (heal.is_empty() || !automated) {
        return None;
    }
    let awaited = pass.memo.lock().expect("lock").awaiting().cloned();
    if let Some(awaited) = awaited
        && appeared(pass, &awaited).await
    {
        pass.memo.lock().expect("lock").awaited_appeared();
    }
    let retry = pass.retry_policy();
    let may_sync = pass
        .memo
        .lock()
        .expect("lock")
        .may_sync(&desired.commit, &retry);
    if !may_sync && !requested {
        return None;
    }
    // A sync that waited for a wave or a hook resumes: same operation,
    // same start, same hooks.
    let resumed = resumed_operation(app, &desired.commit).is_some();
    let mut runs = Vec::new();
    let started_at = match app.status.as_ref().and_then(|s| s.operation_state.as_ref()) {
        Some(operation) if resumed => operation.started_at.clone(),
        _ => now(),
    };
    let started = Instant::now();
    if policy.create_namespace
        && let Err(error) = create_namespace(pass).await
    {
        pass.memo.lock().expect("lock").fail(&desired.commit, None);
        let result = Err(SyncError::Namespace(error));
        finished(pass, &result, started);
        return Some(Ran {
            initiator: Initiator::Automated,
            started_at,
            result,
            hooks: runs,
        });
    }
    let (initiator, result) = if everything {
        let initiator = if requested {
            Initiator::User
        } else if pinned {
            Initiator::Rollback
        } else {
            Initiator::Automated
        };
        if !resumed {
            publish(
                &pass.ctx.recorder,
                app,
                EventType::Normal,
                EventReason::SyncStarted,
                format!(
                    "{initiator} sync of {} object(s) to {}",
                    desired.manifests.len(),
                    &desired.commit
                ),
            )
            .await;
        }
        // A new revision does not overwrite what an open break-glass
        // window keeps: those objects wait for the window to end.
        let manifests: Vec<Manifest> = desired
            .manifests
            .iter()
            .filter(|m| {
                !drift.iter().any(|d| {
                    d.record.kind == DriftKind::Emergency
                        && compared
                            .iter()
                            .any(|c| c.id == d.record.object && c.desired_matches(m))
                })
            })
            .cloned()
            .collect();
        mark_running(pass, &desired.commit, &started_at, manifests.len()).await;
        runs = hooks::earlier_runs(pass, &desired.commit);
        let revision = &desired.commit;
        let result: Result<_, SyncError> = async {
            // PreSync hooks first: one that fails applies nothing else.
            hooks::run(pass, hooks, HookPhase::PreSync, &mut runs, None).await?;
            let report = sync_operation(pass, &manifests, compared, revision, &started_at).await?;
            hooks::run(pass, hooks, HookPhase::Sync, &mut runs, Some(&report)).await?;
            if hooks.has(HookPhase::PostSync) {
                all_healthy(pass, revision, &report).await?;
                hooks::run(pass, hooks, HookPhase::PostSync, &mut runs, Some(&report)).await?;
            }
            Ok(report)
        }
        .await;
        if result.as_ref().is_err_and(|error| !error.is_waiting()) {
            hooks::sync_failed(pass, hooks, &mut runs).await;
        }
        (initiator, result)
    } else {
        let manifests: Vec<Manifest> = desired
            .manifests
            .iter()
            .filter(|m| {
                compared
                    .iter()
                    .any(|c| c.desired_matches(m) && heal.iter().any(|d| d.record.object == c.id))
            })
            .cloned()
            .collect();
        let versions: Vec<(ObjectRef, String)> = compared
            .iter()
            .filter_map(|c| {
                let version = c.live.as_ref()?.pointer("/metadata/resourceVersion")?;
                Some((c.id.clone(), version.as_str()?.to_string()))
            })
            .collect();
        let result = match still_leading(pass).await {
            Ok(()) => reapply(&pass.applier, &pass.owner, &manifests, &versions).await,
            Err(error) => Err(error),
        };
        (Initiator::SelfHeal, result)
    };
    finished(pass, &result, started);
    let mut memo = pass.memo.lock().expect("lock");
    match &result {
        Ok(report) => {
            memo.succeed();
            for applied in &report.applied {
                memo.remember_applied(applied);
            }
        }
        // Waiting for a wave is no failure: no back-off, resumed next pass.
        Err(error) if error.is_waiting() => {}
        Err(error) => {
            memo.fail(&desired.commit, missing(error));
        }
    }
    Some(Ran {
        initiator,
        started_at,
        result,
        hooks: runs,
    })
}

/// Ok unless this replica lost the Lease (see [`crate::fence::Fence`]).
async fn still_leading(pass: &Pass<'_>) -> Result<(), SyncError> {
    match &pass.fence {
        Some(fence) => fence.check().await.map_err(|fenced| SyncError::Fenced {
            wave: 0,
            fenced,
            applied: Vec::new(),
        }),
        None => Ok(()),
    }
}

/// Counts a sync that ran since `started`, by how it ended.
fn finished<T>(pass: &Pass<'_>, result: &Result<T, SyncError>, started: Instant) {
    let phase = match result {
        Ok(_) => OperationPhase::Succeeded,
        // Not finished: it resumes at the next reconcile.
        Err(error) if error.is_waiting() => return,
        Err(_) => OperationPhase::Failed,
    };
    pass.ctx
        .metrics
        .sync_finished(&pass.key, phase, started.elapsed());
}

/// Prunes the app's orphans, deleting only when the app prunes and live is
/// at the desired revision (no sync failed, and a new revision was synced);
/// always reports them.
pub async fn prune(
    pass: &Pass<'_>,
    compared: &[Compared],
    change: RevisionChange,
    sync: Option<&Ran>,
) -> PruneReport {
    let app = &pass.app;
    let succeeded = sync.is_some_and(|s| s.result.is_ok());
    let synced =
        sync.is_none_or(|s| s.result.is_ok()) && change != RevisionChange::New || succeeded;
    let policy = &app.spec.sync_policy;
    let inventory = app.inventory();
    let desired: Vec<ObjectRef> = compared.iter().map(|c| c.id.clone()).collect();
    let options = PruneOptions {
        prune: policy.prune && synced,
        max_share: policy.prune_max_share(),
        allow_mass_prune: app.annotations().contains_key(ALLOW_MASS_PRUNE_ANNOTATION),
        prune_adopted: policy.prune_adopted,
    };
    let cluster = pass.prune_cluster();
    let propagation = policy.prune_propagation.unwrap_or_default();
    prune_orphans(
        &cluster,
        &pass.owner,
        inventory,
        &desired,
        &options,
        propagation,
    )
    .await
}

/// What a failed sync found missing (`namespaces "shop" not found`, a kind
/// the API server does not serve), if that is why it failed.
fn missing(error: &SyncError) -> Option<Awaited> {
    let cause = match error {
        SyncError::Validate(cause) | SyncError::Apply(cause) => cause,
        SyncError::HalfWay { source, .. } => source,
        _ => return None,
    };
    if let Some(namespace) = cause.missing_namespace() {
        return Some(Awaited::Namespace(namespace.to_string()));
    }
    let (api_version, kind) = cause.missing_kind()?;
    Some(Awaited::Kind {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
    })
}

/// Whether what a failure waited for exists now: one GET of the namespace,
/// or one discovery request for the kind's group/version.
async fn appeared(pass: &Pass<'_>, awaited: &Awaited) -> bool {
    let client = pass.target.client().clone();
    match awaited {
        Awaited::Namespace(name) => {
            let namespaces: Api<Namespace> = Api::all(client);
            matches!(namespaces.get_metadata_opt(name).await, Ok(Some(_)))
        }
        Awaited::Kind { api_version, kind } => {
            let Ok((group, version)) = tether_core::object::split_api_version(api_version) else {
                return false;
            };
            let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
            kube::discovery::pinned_kind(&client, &gvk).await.is_ok()
        }
    }
}

/// Creates the destination namespace if it does not exist (Argo CD's
/// `CreateNamespace=true`), labelled as Tether's but not as this app's, so
/// prune never deletes it. Created as the app's identity: a tenant whose
/// ServiceAccount may not create namespaces gets none.
async fn create_namespace(pass: &Pass<'_>) -> Result<(), ClusterError> {
    let name = &pass.app.spec.destination.namespace;
    let namespace = ObjectRef {
        group: String::new(),
        kind: "Namespace".into(),
        namespace: None,
        name: name.clone(),
    };
    let namespaces: Api<Namespace> = Api::all(pass.applier.resources().client().clone());
    let request = |step| {
        let object = namespace.clone();
        move |error| ClusterError::Request {
            object,
            step,
            error,
        }
    };
    if namespaces
        .get_metadata_opt(name)
        .await
        .map_err(request("read"))?
        .is_some()
    {
        return Ok(());
    }
    let created = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name,
            "labels": {MANAGED_BY_LABEL: FIELD_MANAGER},
            "annotations": {CREATED_FOR_ANNOTATION: format!("Application {}/{}", pass.key.0, pass.key.1)}}
    }))
    .expect("a Namespace");
    match namespaces.create(&PostParams::default(), &created).await {
        Ok(_) => {
            let note = format!("{namespace}: created (syncPolicy.createNamespace)");
            publish(
                &pass.ctx.recorder,
                &pass.app,
                EventType::Normal,
                EventReason::NamespaceCreated,
                note,
            )
            .await;
            Ok(())
        }
        // Created in between by someone else: it exists, which is all we need.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(request("create")(error)),
    }
}
