//! Break-glass windows at run time: which windows are open for an app
//! (scopes for drift classification), recording the changes made inside
//! them ([`audit`]), and each window's life: opened, extended, warned,
//! expired, closed ([`lifecycle`]). Opening, extending and closing as a user
//! does are in [`request`].

pub mod audit;
pub mod key;
pub mod lifecycle;
pub mod request;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use kube::ResourceExt;
use kube::runtime::controller::Action as Next;
use kube::runtime::reflector::Store;
use tether_core::drift::{DriftKind, WindowScope};
use tether_core::tracking::AppRef;
use tether_core::window::WindowPhase;

use crate::api::{Application, BreakGlass};
use crate::context::Context;
use crate::drift::Assessed;

/// Label on the windows `tether break-glass open` creates: the app's name.
pub const APP_LABEL: &str = "tether.dev/break-glass-for";

/// An open window of an app and what it covers.
#[derive(Debug, Clone)]
pub struct OpenWindow {
    pub window: Arc<BreakGlass>,
    pub scope: WindowScope,
}

/// The windows of `app` open at `now`, with their scopes; resources
/// without a namespace default to `destination`. Malformed windows, and
/// windows granted longer than `cap` at once, suspend nothing (their
/// status says why).
pub fn open_windows(
    windows: &Store<BreakGlass>,
    app: &AppRef,
    destination: &str,
    now: SystemTime,
    cap: Duration,
) -> Vec<OpenWindow> {
    windows
        .state()
        .into_iter()
        .filter(|w| {
            w.namespace().as_deref() == Some(app.namespace.as_str())
                && w.spec.application == app.name
        })
        .filter_map(|window| {
            let times = window.checked_times(cap).ok()?;
            if times.phase(now) != WindowPhase::Open {
                return None;
            }
            let scope = WindowScope {
                app: app.clone(),
                objects: window
                    .spec
                    .resources
                    .iter()
                    .map(|r| r.object(destination))
                    .collect(),
                opened_at: times.opened_at,
                expires_at: times.expires_at,
            };
            Some(OpenWindow { window, scope })
        })
        .collect()
}

/// The open windows of `app`, once the window watch has listed them all
/// (judging drift before that would heal what a window protects).
pub async fn windows_of(ctx: &Context, app: &Application, owner: &AppRef) -> Vec<OpenWindow> {
    if !ctx.windows_ready.wait().await {
        tracing::warn!(app = %app.name_any(), "the break-glass window watch stopped");
    }
    open_windows(
        &ctx.windows,
        owner,
        &app.spec.destination.namespace,
        SystemTime::now(),
        ctx.config.max_window_ttl,
    )
}

/// Appends each emergency change of `drift` to the window that covers it
/// (its status and its audit log), once per distinct change.
pub async fn record(ctx: &Context, app: &Application, windows: &[OpenWindow], drift: &[Assessed]) {
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

/// `next` (a resync after about `resync`), or sooner: when the first open
/// window ends, self-heal resumes.
pub fn until_expiry(next: Next, windows: &[OpenWindow], resync: Duration) -> Next {
    let now = SystemTime::now();
    match windows.iter().map(|w| w.scope.expires_at).min() {
        Some(expiry) => {
            let wait = expiry.duration_since(now).unwrap_or_default() + Duration::from_millis(100);
            if wait < resync.mul_f64(0.9) {
                Next::requeue(wait)
            } else {
                next
            }
        }
        None => next,
    }
}
