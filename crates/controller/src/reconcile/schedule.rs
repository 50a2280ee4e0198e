//! Sync windows (`spec.syncPolicy.syncWindows`): whether automated syncs
//! and self-heal may run now (the decision is `tether_core::sync_window`),
//! and when to look again because a window opens or closes.

use std::time::Duration;

use tether_core::project::Membership;
use tether_core::sync_window::{self, Verdict, WindowError};

use super::Pass;

/// The verdict of `pass`'s app's own windows and those its Project
/// (`membership`) has for it; `None` when there are none. A malformed
/// window is named with where it is written.
pub fn verdict(pass: &Pass<'_>, membership: Membership<'_>) -> Result<Option<Verdict>, String> {
    let own: Vec<_> = pass
        .app
        .spec
        .sync_policy
        .sync_windows
        .iter()
        .map(tether_core::sync_window::WindowSpec::window)
        .collect();
    let (project, from_project) = match membership {
        Membership::Project { name, rules } => {
            let labels = pass.app.metadata.labels.clone().unwrap_or_default();
            (name, rules.windows_for(&pass.key.1, &labels))
        }
        Membership::Unrestricted => ("", Vec::new()),
    };
    if own.is_empty() && from_project.is_empty() {
        return Ok(None);
    }
    let count = own.len();
    let windows: Vec<_> = own.into_iter().chain(from_project).collect();
    sync_window::judge(&windows, k8s_openapi::jiff::Timestamp::now())
        .map(Some)
        .map_err(|error: WindowError| match error.index.checked_sub(count) {
            None => format!("spec.syncPolicy.{error}"),
            Some(index) => format!("Project {project}: {}", WindowError { index, ..error }),
        })
}

/// A pending `tether sync` is refused while a window blocks manual syncs.
pub fn admit_request(pass: &Pass<'_>, verdict: Option<&Verdict>) -> Result<(), String> {
    match pass.requested() && !manual(verdict) {
        true => {
            let blocked = verdict.map(|v| v.to_string()).unwrap_or_default();
            Err(format!("tether sync refused: {blocked}"))
        }
        false => Ok(()),
    }
}

/// Whether automated syncs and self-heal may run.
pub fn automated(verdict: Option<&Verdict>) -> bool {
    verdict.is_none_or(|verdict| verdict.automated)
}

/// Whether a `tether sync` may run.
pub fn manual(verdict: Option<&Verdict>) -> bool {
    verdict.is_none_or(|verdict| verdict.manual)
}

/// What condition `SyncWindow` says: why automated syncs wait, if they do.
pub fn blocking(verdict: Option<&Verdict>) -> Option<String> {
    verdict
        .filter(|verdict| !verdict.automated)
        .map(ToString::to_string)
}

/// How long until a window opens or closes (a little after, so the next
/// reconcile sees it changed).
pub fn changes_in(verdict: Option<&Verdict>) -> Option<Duration> {
    let until = verdict?.until?;
    let wait = until.duration_since(k8s_openapi::jiff::Timestamp::now());
    let wait = Duration::try_from(wait).unwrap_or_default();
    Some(wait + Duration::from_millis(100))
}
