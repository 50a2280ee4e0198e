//! A full sync run by the reconcile, as an operation others can follow:
//! waves wait for health when the Application asks (`waitForWaves`), and a
//! sync that takes longer than a second reports its progress in
//! `status.operationState` (phase Running), at most once a second, so
//! `tether sync` can show it. Short syncs write nothing extra.

use std::time::{Duration, SystemTime};

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tether_core::OperationPhase;
use tether_source::Manifest;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Pass;
use crate::api::Application;
use crate::api::application::OperationState;
use crate::observe::compare::Compared;
use crate::sync::waves::WaveGate;
use crate::sync::{Progress, SyncError, SyncOptions, SyncReport, sync_manifests_with};

/// The least time between two progress writes.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// The field manager of progress writes; the final status (written with
/// server-side apply by `tether`, forced) takes their fields back.
const PROGRESS_MANAGER: &str = "tether-progress";

/// Records in status that a sync to `revision` is under way, so that a
/// controller that stops mid-sync leaves a trace: the next reconcile sees
/// `Running` and classifies the half-applied objects as Accidental drift.
pub async fn mark_running(pass: &Pass<'_>, revision: &str, started_at: &str, objects: usize) {
    let (ctx, app) = (pass.ctx, &pass.app);
    let _turn = ctx.status_writes.exclusive(&pass.key).await;
    pass.hold_status();
    let api: Api<Application> = Api::namespaced(ctx.client.clone(), &pass.key.0);
    let patch = running(
        &format!("applying {objects} object(s)"),
        revision,
        started_at,
    );
    if let Err(error) = api
        .patch_status(
            &app.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        tracing::warn!(app = %app.name_any(), %error, "recording the running sync failed");
    }
}

/// Syncs `manifests` at `revision`, gating waves on health when the app
/// asks and reporting progress while it runs.
pub async fn sync_operation(
    pass: &Pass<'_>,
    manifests: &[Manifest],
    compared: &[Compared],
    revision: &str,
    started_at: &str,
) -> Result<SyncReport, SyncError> {
    let (ctx, app) = (pass.ctx, &pass.app);
    let policy = &app.spec.sync_policy;
    let judge = ctx.health.for_app(&pass.key, &app.spec.health.rules);
    let gate = WaveGate {
        live: &pass.target.live,
        judge: &judge,
        resources: &pass.target.resources,
        timeout: policy.wave_timeout(),
        resumed: resumed_wait(app, revision),
    };
    let (progress, seen) = watch::channel(Progress::default());
    let options = SyncOptions {
        gate: policy.wait_for_waves.then_some(&gate),
        progress: Some(&progress),
        fence: pass.fence.as_ref(),
        compared,
    };
    let done = CancellationToken::new();
    let sync = async {
        let result = sync_manifests_with(&pass.applier, &pass.owner, manifests, &options).await;
        done.cancel();
        result
    };
    let (result, ()) = tokio::join!(
        sync,
        write_progress(pass, revision, started_at, seen, &done)
    );
    result
}

/// The wave wait an earlier pass of the sync toward `revision` left in
/// status: its wave and when it began.
pub fn resumed_wait(app: &Application, revision: &str) -> Option<(i32, SystemTime)> {
    let operation = resumed_operation(app, revision)?;
    let waiting = operation.waiting.as_ref().filter(|w| w.hook.is_none())?;
    let since: k8s_openapi::jiff::Timestamp = waiting.since.parse().ok()?;
    Some((waiting.wave, SystemTime::from(since)))
}

/// The operation toward `revision` an earlier pass left waiting (for a
/// wave, or for a hook), to resume.
pub fn resumed_operation<'a>(app: &'a Application, revision: &str) -> Option<&'a OperationState> {
    let operation = app.status.as_ref()?.operation_state.as_ref()?;
    (operation.phase == OperationPhase::Running
        && operation.revision == revision
        && operation.waiting.is_some())
    .then_some(operation)
}

/// Returns once every object `report` applied is Healthy (before the
/// PostSync hooks): waits like a wave (its last one), yielding the worker
/// after a hold, and fails after `waveTimeoutSeconds`.
pub async fn all_healthy(
    pass: &Pass<'_>,
    revision: &str,
    report: &SyncReport,
) -> Result<(), SyncError> {
    let app = &pass.app;
    let judge = pass.ctx.health.for_app(&pass.key, &app.spec.health.rules);
    let gate = WaveGate {
        live: &pass.target.live,
        judge: &judge,
        resources: &pass.target.resources,
        timeout: app.spec.sync_policy.wave_timeout(),
        resumed: resumed_wait(app, revision),
    };
    let last = report
        .applied
        .iter()
        .filter_map(|applied| tether_core::order::sync_wave(&applied.sent).ok())
        .max()
        .unwrap_or_default();
    gate.wait(last, &report.applied)
        .await
        .map_err(|error| match error {
            SyncError::Unhealthy {
                object,
                waited,
                message,
                ..
            } => SyncError::PostSyncBlocked {
                object,
                waited,
                message,
                applied: report.results.clone(),
            },
            other => other.waiting_after(report),
        })
}

/// Writes the latest progress once a second until `done`; never cancelled
/// in the middle of a write, so it cannot land after the final status.
async fn write_progress(
    pass: &Pass<'_>,
    revision: &str,
    started_at: &str,
    mut seen: watch::Receiver<Progress>,
    done: &CancellationToken,
) {
    let app = &pass.app;
    let api: Api<Application> = Api::namespaced(pass.ctx.client.clone(), &pass.key.0);
    let params = PatchParams {
        field_manager: Some(PROGRESS_MANAGER.into()),
        ..PatchParams::default()
    };
    let mut ticks = tokio::time::interval_at(
        tokio::time::Instant::now() + PROGRESS_INTERVAL,
        PROGRESS_INTERVAL,
    );
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = done.cancelled() => return,
            _ = ticks.tick() => {}
        }
        if !seen.has_changed().unwrap_or(false) {
            continue;
        }
        let progress = *seen.borrow_and_update();
        let patch = running(&progress.to_string(), revision, started_at);
        pass.hold_status();
        if let Err(error) = api
            .patch_status(&app.name_any(), &params, &Patch::Merge(&patch))
            .await
        {
            tracing::debug!(app = %app.name_any(), %error, "writing sync progress failed");
        }
    }
}

/// The status patch of a sync under way: phase Running, what it is doing,
/// and no outcome yet.
fn running(message: &str, revision: &str, started_at: &str) -> Value {
    json!({"status": {"operationState": {
        "phase": OperationPhase::Running,
        "message": message,
        "revision": revision,
        "startedAt": started_at,
        "finishedAt": null,
        "changes": null,
        "waiting": null,
    }}})
}
