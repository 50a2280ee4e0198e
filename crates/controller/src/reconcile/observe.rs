//! Observe and diff: the desired objects next to their live copies, and
//! the drift among them, classified and answered.

use std::time::SystemTime;

use tether_cluster::ClusterError;
use tether_core::revision::{LastSync, RevisionChange, revision_change};
use tether_core::{OperationPhase, drift::WindowScope};
use tether_source::Rendered;

use super::Pass;
use super::report::now;
use crate::api::Application;
use crate::break_glass::OpenWindow;
use crate::observe::compare::{Compared, Observer, compare_all};
use crate::observe::drift::{self, Assessed, Policy};

/// Compares every desired object with the live cluster.
pub async fn compare(pass: &Pass<'_>, desired: &Rendered) -> Result<Vec<Compared>, ClusterError> {
    let ctx = pass.ctx;
    let observer = Observer {
        live: &pass.target.live,
        resources: &pass.target.resources,
        mask: ctx.audit_key.secret_mask(),
    };
    compare_all(
        &observer,
        &pass.applier,
        &pass.owner,
        &desired.manifests,
        &pass.app.spec.ignore_differences,
        &pass.memo,
    )
    .await
}

/// How `desired` relates to the app's last successful sync.
pub fn change(pass: &Pass<'_>, desired: &Rendered) -> RevisionChange {
    revision_change(last_sync(&pass.app), &desired.commit, &desired.digest)
}

/// What the last successful sync recorded in status.
pub fn last_sync(app: &Application) -> Option<LastSync<'_>> {
    let status = app.status.as_ref()?;
    Some(LastSync {
        revision: status.sync.revision.as_deref()?,
        digest: status.sync.objects_digest.as_deref(),
        settled: status
            .operation_state
            .as_ref()
            .is_none_or(|operation| operation.phase == OperationPhase::Succeeded),
    })
}

/// Classifies each drifted object and, through the app's flap guard,
/// decides whether to revert it; changes inside `windows` are Emergency.
pub fn drift(
    pass: &Pass<'_>,
    compared: &[Compared],
    revision: &str,
    change: RevisionChange,
    windows: &[OpenWindow],
) -> Vec<Assessed> {
    let app = &pass.app;
    let pending = change == RevisionChange::New;
    let scopes: Vec<WindowScope> = windows.iter().map(|w| w.scope.clone()).collect();
    let inventory = app.inventory();
    let policy = Policy {
        app: &pass.owner,
        inventory,
        pending,
        heals: app.spec.sync_policy.heals() && super::schedule::automated(pass.sync_window()),
        windows: &scopes,
        interrupted: pending && drift::interrupted(app.status.as_ref(), revision),
    };
    let mut memo = pass.memo.lock().expect("lock");
    drift::assess(
        &policy,
        compared,
        &mut memo.flaps,
        SystemTime::now(),
        &now(),
    )
}
