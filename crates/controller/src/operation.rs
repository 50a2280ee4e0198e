//! A full sync run by the reconcile, as an operation others can follow:
//! waves wait for health when the Application asks (`waitForWaves`), and a
//! sync that takes longer than a second reports its progress in
//! `status.operationState` (phase Running), at most once a second, so
//! `tether sync` can show it. Short syncs write nothing extra.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use tether_cluster::Applier;
use tether_core::tracking::AppRef;
use tether_source::Manifest;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::api::Application;
use crate::compare::Compared;
use crate::context::Context;
use crate::sync::{Progress, SyncError, SyncOptions, SyncReport, sync_manifests_with};
use crate::waves::WaveGate;

/// The least time between two progress writes.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// The field manager of progress writes; the final status (written with
/// server-side apply by `tether`, forced) takes their fields back.
const PROGRESS_MANAGER: &str = "tether-progress";

/// Syncs `manifests` for `app` at `revision`, gating waves on health when
/// the app asks and reporting progress while it runs.
#[allow(clippy::too_many_arguments)]
pub async fn sync_operation(
    ctx: &Context,
    app: &Application,
    applier: &Applier,
    owner: &AppRef,
    manifests: &[Manifest],
    compared: &[Compared],
    revision: &str,
    started_at: &str,
) -> Result<SyncReport, SyncError> {
    let policy = &app.spec.sync_policy;
    let key = (app.namespace().unwrap_or_default(), app.name_any());
    let judge = ctx.health.for_app(&key, &app.spec.health.rules);
    let gate = WaveGate {
        live: &ctx.live,
        judge: &judge,
        resources: &ctx.resources,
        timeout: policy.wave_timeout(),
    };
    let (progress, seen) = watch::channel(Progress::default());
    let options = SyncOptions {
        gate: policy.wait_for_waves.then_some(&gate),
        progress: Some(&progress),
        compared,
    };
    let done = CancellationToken::new();
    let sync = async {
        let result = sync_manifests_with(applier, owner, manifests, &options).await;
        done.cancel();
        result
    };
    let (result, ()) = tokio::join!(
        sync,
        write_progress(ctx, app, revision, started_at, seen, &done)
    );
    result
}

/// Writes the latest progress once a second until `done`; never cancelled
/// in the middle of a write, so it cannot land after the final status.
async fn write_progress(
    ctx: &Context,
    app: &Application,
    revision: &str,
    started_at: &str,
    mut seen: watch::Receiver<Progress>,
    done: &CancellationToken,
) {
    let api: Api<Application> =
        Api::namespaced(ctx.client.clone(), &app.namespace().unwrap_or_default());
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
        let patch = serde_json::json!({"status": {"operationState": {
            "phase": tether_core::OperationPhase::Running,
            "message": progress.to_string(),
            "revision": revision,
            "startedAt": started_at,
            "finishedAt": null,
            "changes": null,
        }}});
        if let Err(error) = api
            .patch_status(&app.name_any(), &params, &Patch::Merge(&patch))
            .await
        {
            tracing::debug!(app = %app.name_any(), %error, "writing sync progress failed");
        }
    }
}
