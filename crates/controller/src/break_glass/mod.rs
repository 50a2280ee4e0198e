//! Break-glass windows at run time: which windows are open for an app
//! (scopes for drift classification), the audit log of the changes made
//! inside them ([`audit`], sealed with [`key`]), and each window's life: opened, extended, warned,
//! expired, closed ([`lifecycle`]). Opening, extending and closing as a user
//! does are in [`request`].

pub mod audit;
pub mod key;
pub mod lifecycle;
pub mod request;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use kube::ResourceExt;
use kube::runtime::reflector::Store;
use tether_core::drift::WindowScope;
use tether_core::tracking::AppRef;
use tether_core::window::WindowPhase;

use crate::api::BreakGlass;

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
