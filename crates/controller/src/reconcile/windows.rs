//! The break-glass step of a reconcile: the app's open windows, and the
//! emergency changes made inside them, recorded once each.

use std::time::SystemTime;

use kube::ResourceExt;
use tether_core::drift::DriftKind;

use super::Pass;
use crate::break_glass::{OpenWindow, audit, open_windows};
use crate::observe::drift::Assessed;

/// The open windows of `app`, once the window watch has listed them all
/// (judging drift before that would heal what a window protects).
pub async fn open(pass: &Pass<'_>) -> Vec<OpenWindow> {
    let (ctx, app) = (pass.ctx, &pass.app);
    if !ctx.windows_ready.wait().await {
        tracing::warn!(app = %app.name_any(), "the break-glass window watch stopped");
    }
    open_windows(
        &ctx.windows,
        &pass.owner,
        &app.spec.destination.namespace,
        SystemTime::now(),
        ctx.config.max_window_ttl,
    )
}

/// Appends each emergency change of `drift` to the window that covers it
/// (its status and its audit log), once per distinct change.
pub async fn record(pass: &Pass<'_>, windows: &[OpenWindow], drift: &[Assessed]) {
    let (ctx, app) = (pass.ctx, &pass.app);
    let now = SystemTime::now();
    let recorded_at = crate::api::break_glass::format_time(now);
    let app_name = app.name_any();
    for assessed in drift
        .iter()
        .filter(|d| d.record.kind == DriftKind::Emergency)
    {
        let record = &assessed.record;
        let Some(open) = windows
            .iter()
            .find(|w| w.scope.covers(&w.scope.app, &record.object, now))
        else {
            continue;
        };
        let change = audit::Change {
            app: &app_name,
            object: &record.object,
            fields: &record.fields,
            recorded_at: &recorded_at,
        };
        match ctx.audit.record(&ctx.client, &open.window, &change).await {
            Ok(Some(entry)) => tracing::info!(
                window = %open.window.name_any(), object = %record.object,
                audit = %entry.audit, "emergency change recorded"
            ),
            Ok(None) => {}
            Err(error) => tracing::warn!(
                window = %open.window.name_any(), object = %record.object, %error,
                "recording an emergency change failed; retrying on the next reconcile"
            ),
        }
    }
}
