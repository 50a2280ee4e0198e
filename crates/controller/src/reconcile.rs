//! The loop, for one Application: fetch → observe → diff → apply → report.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action as Next;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use tether_cluster::Applier;
use tether_core::tracking::{AppRef, FIELD_MANAGER};
use tether_source::{Manifest, Rendered};

use crate::api::{Application, ApplicationStatus};
use crate::compare::{Compared, compare_all};
use crate::context::Context;
use crate::memo::AppMemo;
use crate::status::{Failure, Observed, Step, SyncRun, next_status};
use crate::sync::sync_manifests;

/// Why a reconcile could not even report (writing status failed).
#[derive(Debug, thiserror::Error)]
#[error("Application {app}: writing status failed: {error}")]
pub struct ReconcileError {
    app: String,
    error: kube::Error,
}

/// Reconciles one Application. Every step's failure is reported through
/// [`report`] with its own reason; only a failure to report is an error.
pub async fn reconcile(app: Arc<Application>, ctx: Arc<Context>) -> Result<Next, ReconcileError> {
    let key = (app.namespace().unwrap_or_default(), app.name_any());
    let owner = AppRef::new(&key.0, &key.1);
    ctx.live.register_owner(owner.label_value(), key.clone());
    let memo = ctx.memo(&key);
    let policy = &app.spec.sync_policy;
    let applier = Applier::new(
        ctx.resources.clone(),
        app.spec.destination.namespace.clone(),
    );

    // Fetch the desired state.
    let desired = match fetch(&ctx, &app).await {
        Ok(desired) => desired,
        Err(message) => {
            return report(
                &ctx,
                &app,
                &memo,
                None,
                None,
                Some(&Failure {
                    step: Step::Fetch,
                    message,
                }),
            )
            .await;
        }
    };

    // Observe and diff.
    let ignore = &app.spec.ignore_differences;
    let compared =
        match compare_all(&ctx, &applier, &owner, &desired.manifests, ignore, &memo).await {
            Ok(compared) => compared,
            Err(error) => {
                let failure = Failure {
                    step: Step::Diff,
                    message: error.to_string(),
                };
                return report(&ctx, &app, &memo, None, None, Some(&failure)).await;
            }
        };

    // Apply what differs, when the policy allows it.
    let previous = memo.lock().expect("lock").written_status.clone();
    let previous = previous.as_ref().or(app.status.as_ref());
    let new_revision =
        previous.and_then(|s| s.sync.revision.as_deref()) != Some(desired.commit.as_str());
    let out_of_sync: Vec<&Compared> = compared.iter().filter(|c| !c.in_sync()).collect();
    let retry = &policy.retry;
    let (base, max) = (
        Duration::from_secs(retry.backoff_seconds.into()),
        Duration::from_secs(retry.max_backoff_seconds.into()),
    );
    let may_sync = memo
        .lock()
        .expect("lock")
        .may_sync(&desired.commit, retry.limit, base, max);
    let wanted = policy.automated && (new_revision || policy.self_heal);
    let observed = Observed {
        revision: &desired.commit,
        tree: &desired.tree,
        compared: &compared,
    };
    if out_of_sync.is_empty() || !wanted || !may_sync {
        return report(&ctx, &app, &memo, Some(&observed), None, None).await;
    }
    // A new revision syncs everything; self-heal re-applies only what drifted.
    let to_apply: Vec<Manifest> = if new_revision {
        desired.manifests.clone()
    } else {
        desired
            .manifests
            .iter()
            .filter(|m| out_of_sync.iter().any(|c| c.desired_matches(m)))
            .cloned()
            .collect()
    };
    let initiator = if new_revision {
        "automated"
    } else {
        "self-heal"
    };
    let started_at = now();
    publish(
        &ctx,
        &app,
        EventType::Normal,
        "SyncStarted",
        format!(
            "{initiator} sync of {} object(s) to {}",
            to_apply.len(),
            &desired.commit
        ),
    )
    .await;
    let result = sync_manifests(&applier, &owner, &to_apply).await;
    let failure = match &result {
        Ok(report) => {
            let mut memo = memo.lock().expect("lock");
            memo.succeed();
            for applied in &report.applied {
                memo.remember_applied(applied);
            }
            None
        }
        Err(error) => {
            memo.lock().expect("lock").fail(&desired.commit);
            Some(Failure {
                step: Step::Apply,
                message: error.to_string(),
            })
        }
    };
    match &result {
        Ok(report) => {
            publish(
                &ctx,
                &app,
                EventType::Normal,
                "SyncSucceeded",
                format!(
                    "synced {} object(s) to {}",
                    report.results.len(),
                    &desired.commit
                ),
            )
            .await
        }
        Err(error) => {
            publish(
                &ctx,
                &app,
                EventType::Warning,
                "SyncFailed",
                error.to_string(),
            )
            .await
        }
    }
    let run = SyncRun {
        revision: &desired.commit,
        initiator,
        started_at: &started_at,
        outcome: result.as_ref().map_err(|error| error.to_string()),
    };
    report(
        &ctx,
        &app,
        &memo,
        Some(&observed),
        Some(&run),
        failure.as_ref(),
    )
    .await
}

/// On an error the controller retries with backoff; reconcile reports its
/// own failures, so this is only reached when status could not be written.
pub fn error_policy(_app: Arc<Application>, error: &ReconcileError, _ctx: Arc<Context>) -> Next {
    tracing::warn!(%error, "reconcile failed");
    Next::requeue(Duration::from_secs(5))
}

async fn fetch(ctx: &Context, app: &Application) -> Result<Rendered, String> {
    let repositories = ctx.repositories.clone();
    let source = app.spec.source.clone();
    tokio::task::spawn_blocking(move || repositories.fetch(&source, None))
        .await
        .map_err(|error| format!("fetch task failed: {error}"))?
        .map_err(|error| error.to_string())
}

/// Writes the next status when it differs from the current one, and says
/// when to look again.
async fn report(
    ctx: &Context,
    app: &Application,
    memo: &Mutex<AppMemo>,
    observed: Option<&Observed<'_>>,
    sync: Option<&SyncRun<'_>>,
    failure: Option<&Failure>,
) -> Result<Next, ReconcileError> {
    // The newer of what this controller last wrote and the cached object.
    let written = memo.lock().expect("lock").written_status.clone();
    let previous = written.as_ref().or(app.status.as_ref());
    let status = next_status(
        previous,
        app.metadata.generation,
        observed,
        sync,
        failure,
        &now(),
    );
    if previous != Some(&status) {
        write_status(ctx, app, &status)
            .await
            .map_err(|error| ReconcileError {
                app: app.name_any(),
                error,
            })?;
        memo.lock().expect("lock").written_status = Some(status);
    }
    if let Some(failure) = failure {
        tracing::warn!(app = %app.name_any(), reason = failure.step.reason(), message = %failure.message, "reconcile step failed");
    }
    Ok(Next::requeue(jittered(ctx.config.resync)))
}

async fn write_status(
    ctx: &Context,
    app: &Application,
    status: &ApplicationStatus,
) -> Result<(), kube::Error> {
    let api: Api<Application> =
        Api::namespaced(ctx.client.clone(), &app.namespace().unwrap_or_default());
    let patch = serde_json::json!({
        "apiVersion": Application::api_version(&()),
        "kind": Application::kind(&()),
        "status": status,
    });
    api.patch_status(
        &app.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

async fn publish(ctx: &Context, app: &Application, type_: EventType, reason: &str, note: String) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: "Sync".into(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &app.object_ref(&())).await {
        tracing::debug!(%error, "publishing event failed");
    }
}

fn jittered(period: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let spread = (nanos % 200) as f64 / 1000.0 - 0.1; // ±10%
    period.mul_f64(1.0 + spread)
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}
