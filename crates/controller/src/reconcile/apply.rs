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
    ALLOW_MASS_PRUNE_ANNOTATION, CREATED_FOR_ANNOTATION, HookRun, MANAGED_BY_LABEL,
    SYNC_REQUEST_ANNOTATION,
};
use crate::observe::compare::Compared;
use crate::observe::drift::{Assessed, Response};
use crate::observe::memo::Awaited;
use crate::report::events::publish;
use crate::sync::prune::{PruneReport, prune as prune_orphans};
use crate::sync::{Ran, SyncError, SyncReport, reapply};
use tether_core::hook::HookPhase;

/// What one pass applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Nothing,
    /// The whole desired state, as a sync operation started by the
    /// initiator.
    Everything(Initiator),
    /// Only the objects self-heal reverts.
    Heal,
}

/// What a pass applies: everything for a `tether sync` (`requested`) or a
/// new revision when automated or held by a rollback's pin; else, when
/// automated and something drifted that self-heal reverts, only that.
fn scope(
    requested: bool,
    change: RevisionChange,
    automated: bool,
    pinned: bool,
    healing: bool,
) -> Scope {
    if requested {
        Scope::Everything(Initiator::User)
    } else if change == RevisionChange::New && pinned {
        Scope::Everything(Initiator::Rollback)
    } else if change == RevisionChange::New && automated {
        Scope::Everything(Initiator::Automated)
    } else if healing && automated {
        Scope::Heal
    } else {
        Scope::Nothing
    }
}

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
    let requested = app.annotations().contains_key(SYNC_REQUEST_ANNOTATION);
    let heal: Vec<&Assessed> = drift
        .iter()
        .filter(|d| d.response == Response::Heal)
        .collect();
    // Inside a deny window (or outside every allow window) nothing runs
    // on its own; a `tether sync` got here only if a window lets it.
    let automated =
        app.spec.sync_policy.automated && super::schedule::automated(pass.sync_window());
    let scope = scope(
        requested,
        change,
        automated,
        pass.pin_holds(),
        !heal.is_empty(),
    );
    if scope == Scope::Nothing || !may_sync(pass, &desired.commit).await && !requested {
        return None;
    }
    // A sync that waited for a wave or a hook resumes: same operation,
    // same start, same hooks.
    let resumed = resumed_operation(app, &desired.commit).is_some();
    let started_at = match app.status.as_ref().and_then(|s| s.operation_state.as_ref()) {
        Some(operation) if resumed => operation.started_at.clone(),
        _ => now(),
    };
    let started = Instant::now();
    let (initiator, result, runs) = if app.spec.sync_policy.create_namespace
        && let Err(error) = create_namespace(pass).await
    {
        let failed = Err(SyncError::Namespace(error));
        (Initiator::Automated, failed, Vec::new())
    } else if let Scope::Everything(initiator) = scope {
        if !resumed {
            let note = format!(
                "{initiator} sync of {} object(s) to {}",
                desired.manifests.len(),
                &desired.commit
            );
            let recorder = &pass.ctx.recorder;
            publish(
                recorder,
                app,
                EventType::Normal,
                EventReason::SyncStarted,
                note,
            )
            .await;
        }
        let (result, runs) = everything(pass, desired, compared, drift, hooks, &started_at).await;
        (initiator, result, runs)
    } else {
        let result = self_heal(pass, desired, compared, &heal).await;
        (Initiator::SelfHeal, result, Vec::new())
    };
    finished(pass, &result, started);
    remember(pass, &desired.commit, &result);
    Some(Ran {
        initiator,
        started_at,
        result,
        hooks: runs,
    })
}

/// Whether the retry policy lets `commit` be synced now, once what the
/// last failure waited for (a namespace, a kind) is looked for again.
async fn may_sync(pass: &Pass<'_>, commit: &str) -> bool {
    let awaited = pass.memo.lock().expect("lock").awaiting().cloned();
    if let Some(awaited) = awaited
        && appeared(pass, &awaited).await
    {
        pass.memo.lock().expect("lock").awaited_appeared();
    }
    let retry = pass.retry_policy();
    pass.memo.lock().expect("lock").may_sync(commit, &retry)
}

/// The sync operation of the whole desired state: PreSync hooks, the
/// objects in waves, Sync hooks, then (once all is healthy) PostSync
/// hooks; SyncFail hooks when it fails. Objects an open break-glass
/// window keeps wait for the window to end. Returns the hooks run too.
async fn everything(
    pass: &Pass<'_>,
    desired: &Rendered,
    compared: &[Compared],
    drift: &[Assessed],
    hooks: &Hooks,
    started_at: &str,
) -> (Result<SyncReport, SyncError>, Vec<HookRun>) {
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
    let revision = &desired.commit;
    mark_running(pass, revision, started_at, manifests.len()).await;
    let mut runs = hooks::earlier_runs(pass, revision);
    let result: Result<_, SyncError> = async {
        // PreSync hooks first: one that fails applies nothing else.
        hooks::run(pass, hooks, HookPhase::PreSync, &mut runs, None).await?;
        let report = sync_operation(pass, &manifests, compared, revision, started_at).await?;
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
    (result, runs)
}

/// Re-applies the objects self-heal reverts, each only if live is still
/// at the resourceVersion compared (another writer's newer change wins).
async fn self_heal(
    pass: &Pass<'_>,
    desired: &Rendered,
    compared: &[Compared],
    heal: &[&Assessed],
) -> Result<SyncReport, SyncError> {
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
    still_leading(pass).await?;
    reapply(&pass.applier, &pass.owner, &manifests, &versions).await
}

/// Keeps what a sync's end means for the next: success clears the
/// back-off and remembers what was applied; a failure (not a wait for a
/// wave, which resumes next pass) backs off, noting what was missing.
fn remember(pass: &Pass<'_>, commit: &str, result: &Result<SyncReport, SyncError>) {
    let mut memo = pass.memo.lock().expect("lock");
    match result {
        Ok(report) => {
            memo.succeed();
            for applied in &report.applied {
                memo.remember_applied(applied);
            }
        }
        Err(error) if error.is_waiting() => {}
        Err(error) => {
            memo.fail(commit, missing(error));
        }
    }
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

#[cfg(test)]
mod tests {
    use super::{Scope, scope};
    use tether_core::Initiator;
    use tether_core::revision::RevisionChange::{New, Same};

    #[test]
    fn a_tether_sync_applies_everything_even_when_nothing_changed_and_sync_is_manual() {
        assert_eq!(
            scope(true, Same, false, false, false),
            Scope::Everything(Initiator::User)
        );
    }

    #[test]
    fn a_new_revision_is_synced_when_automated_or_pinned_by_a_rollback() {
        let pass = |automated, pinned| scope(false, New, automated, pinned, false);
        assert_eq!(pass(true, false), Scope::Everything(Initiator::Automated));
        assert_eq!(pass(false, true), Scope::Everything(Initiator::Rollback));
        assert_eq!(pass(true, true), Scope::Everything(Initiator::Rollback));
        assert_eq!(pass(false, false), Scope::Nothing);
    }

    #[test]
    fn drift_alone_re_applies_only_what_self_heal_reverts_and_only_when_automated() {
        assert_eq!(scope(false, Same, true, false, true), Scope::Heal);
        assert_eq!(scope(false, Same, false, false, true), Scope::Nothing);
        assert_eq!(scope(false, Same, true, false, false), Scope::Nothing);
    }
}
