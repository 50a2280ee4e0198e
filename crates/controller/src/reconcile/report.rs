//! Report: the next status from what this reconcile found, written when it
//! changed, the events that go with it, and when to look again.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use kube::ResourceExt;
use kube::runtime::controller::Action as Next;
use tether_core::OperationPhase;
use tether_core::alert;
use tether_core::argocd::Warning;
use tether_core::backoff::doubling;
use tether_core::revision::RevisionChange;
use tether_source::Rendered;

use super::{Pass, ReconcileError};
use crate::api::application::WaveWait;
use crate::api::{Application, StoredApplication};
use crate::break_glass::OpenWindow;
use crate::context::Context;
use crate::observe::compare::Compared;
use crate::observe::drift::{Assessed, Response};
use crate::report::events::{announce, announce_changes};
use crate::report::notices::notices;
use crate::report::status::{
    Failure, Observed, RECONCILED_CONDITION, Step, SyncRun, next_status, only_revision_moved,
};
use crate::request;
use crate::sync::prune::PruneReport;
use crate::sync::{Ran, SyncError};

/// What a reconcile that got past its checks found and did.
pub struct Findings<'a> {
    pub desired: &'a Rendered,
    pub change: RevisionChange,
    pub compared: &'a [Compared],
    pub drift: &'a [Assessed],
    pub sync: Option<&'a Ran>,
    pub pruned: &'a PruneReport,
    /// Argo CD annotations Tether does not act on.
    pub unsupported: &'a [Warning],
    /// What the app's sync windows say now.
    pub sync_window: Option<&'a tether_core::sync_window::Verdict>,
}

/// Reports `found`: events first, then status (with the failure of the
/// sync, or of an earlier one still in force); drops handled requests.
pub async fn findings(pass: &Pass<'_>, found: &Findings<'_>) -> Result<Next, ReconcileError> {
    let (ctx, app, desired) = (pass.ctx, &pass.app, found.desired);
    let health = ctx.health.for_app(&pass.key, &app.spec.health.rules);
    let observed = Observed {
        revision: &desired.commit,
        tree: &desired.tree,
        digest: &desired.digest,
        sources: &desired.sources,
        change: found.change,
        compared: found.compared,
        health: &health,
        drift: found.drift,
        prune: found.pruned,
        unsupported: found.unsupported,
        sync_window: super::schedule::blocking(found.sync_window),
        pin: pass.pin_state(),
    };
    announce(
        &ctx.recorder,
        &ctx.metrics,
        app,
        found.drift,
        found.sync,
        found.pruned,
    )
    .await;
    let run = found.sync.map(|sync| SyncRun {
        revision: &desired.commit,
        initiator: sync.initiator,
        started_at: &sync.started_at,
        outcome: sync
            .result
            .as_ref()
            .map_err(|error| (error.to_string(), error.applied())),
        waiting: sync.result.as_ref().err().and_then(wave_wait),
        hooks: &sync.hooks,
    });
    let failure = match found.sync {
        Some(ran) => ran
            .result
            .as_ref()
            .err()
            .filter(|error| !error.is_waiting())
            .map(|error| Failure {
                step: step_of(error),
                message: error.to_string(),
            }),
        None => failure_in_force(app, &desired.commit, found.compared),
    };
    let next = status(pass, Some(&observed), run.as_ref(), failure.as_ref()).await?;
    // A request stands until its sync is over, not while it waits.
    if !waiting(found.sync) {
        request::clear(&ctx.client, app).await;
    }
    Ok(next)
}

/// Whether the sync of this pass waits for a wave, to resume later.
fn waiting(sync: Option<&Ran>) -> bool {
    sync.is_some_and(|sync| sync.result.as_ref().is_err_and(SyncError::is_waiting))
}

/// What status records of a sync waiting for a wave.
fn wave_wait(error: &SyncError) -> Option<WaveWait> {
    if let SyncError::HookRunning {
        phase,
        hook,
        message,
        since,
        ..
    } = error
    {
        return Some(WaveWait {
            wave: 0,
            object: format!("{hook}: {message}"),
            since: k8s_openapi::jiff::Timestamp::try_from(*since)
                .map(|time| time.to_string())
                .unwrap_or_default(),
            hook: Some(*phase),
        });
    }
    let SyncError::Waiting {
        object,
        wave,
        message,
        since,
        ..
    } = error
    else {
        return None;
    };
    Some(WaveWait {
        wave: *wave,
        object: format!("{object}: {message}"),
        since: k8s_openapi::jiff::Timestamp::try_from(*since)
            .map(|time| time.to_string())
            .unwrap_or_default(),
        hook: None,
    })
}

/// How soon a sync waiting for a wave looks again when no watch event
/// wakes it first.
const WAVE_RECHECK: Duration = Duration::from_secs(3);

/// How often a failed sync checks whether the namespace it found missing
/// exists now.
const AWAIT_POLL: Duration = Duration::from_secs(5);

/// When to look again: after about the resync interval (`next`), or sooner
/// — when the first open break-glass window ends, when a flap-guard
/// back-off ends, or when a failed sync of `revision` may be retried (and
/// every few seconds while the namespace it found missing does not exist),
/// or a few seconds after a sync that waits for a wave.
pub fn look_again(
    pass: &Pass<'_>,
    next: Next,
    (windows, drift): (&[OpenWindow], &[Assessed]),
    sync: Option<&Ran>,
    revision: &str,
) -> Next {
    let now = SystemTime::now();
    let until = |instant: SystemTime| instant.duration_since(now).unwrap_or_default();
    let resync = pass.ctx.config.resync;
    let window_ends = windows
        .iter()
        .map(|w| until(w.scope.expires_at) + Duration::from_millis(100))
        .min()
        .filter(|wait| *wait < resync.mul_f64(0.9));
    let back_off_ends = drift
        .iter()
        .filter_map(|d| match &d.response {
            Response::BackOff(fight) => Some(until(fight.until) + Duration::from_millis(50)),
            _ => None,
        })
        .min();
    let memo = pass.memo.lock().expect("lock");
    let retry = match memo.awaiting() {
        Some(_) => Some(AWAIT_POLL),
        None => memo
            .retry_in(revision, &pass.retry_policy())
            .map(|wait| wait + Duration::from_millis(50)),
    };
    let alert_due = memo
        .written_status
        .as_deref()
        .or(pass.app.status.as_ref())
        .and_then(|status| status.sync.not_synced_since.as_deref())
        .and_then(|since| alert::due_in(Some(since), &self::now(), pass.alert_after()))
        .map(|due| due + ALERT_MARGIN);
    let resume = waiting(sync).then_some(WAVE_RECHECK);
    let sync_window =
        super::schedule::changes_in(pass.sync_window()).filter(|wait| *wait < resync.mul_f64(0.9));
    // The safety-net resync stands whatever else is due: without it an app
    // left OutOfSync (a deny window, warn mode) was next looked at when its
    // NotSynced alert fell due, an hour later.
    let safety_net = Some(jittered(resync));
    match [
        window_ends,
        back_off_ends,
        retry,
        alert_due,
        resume,
        sync_window,
        safety_net,
    ]
    .into_iter()
    .flatten()
    .min()
    {
        Some(wait) => Next::requeue(wait),
        None => next,
    }
}

/// The step a sync failed at: the dry run of the whole set (and the
/// waves' order) validates; anything after it applies.
fn step_of(error: &SyncError) -> Step {
    match error {
        SyncError::Order { .. } | SyncError::Validate(_) => Step::Validate,
        SyncError::Hook { .. } => Step::Hook,
        _ => Step::Apply,
    }
}

/// A failed sync of this very revision that no sync has replaced yet (it
/// is waiting out its backoff): its failure still stands, so a reconcile
/// in between must not report success.
fn failure_in_force(app: &Application, revision: &str, compared: &[Compared]) -> Option<Failure> {
    let status = app.status.as_ref()?;
    let operation = status.operation_state.as_ref()?;
    let pending = compared.iter().any(|c| !c.in_sync());
    // The step the failure was reported under when the sync ran.
    let step = status
        .conditions
        .iter()
        .find(|c| c.type_ == RECONCILED_CONDITION)
        .and_then(|c| c.reason.parse().ok())
        .unwrap_or(Step::Apply);
    (operation.phase == OperationPhase::Failed && operation.revision == revision && pending).then(
        || Failure {
            step,
            message: operation.message.clone(),
        },
    )
}

/// Writes the next status when it differs from the current one, and says
/// when to look again.
pub async fn status(
    pass: &Pass<'_>,
    observed: Option<&Observed<'_>>,
    sync: Option<&SyncRun<'_>>,
    failure: Option<&Failure>,
) -> Result<Next, ReconcileError> {
    let (ctx, app) = (pass.ctx, &pass.app);
    let previous = app.status.as_ref();
    let now = now();
    let alert_after = pass.alert_after();
    let mut status = next_status(
        previous,
        app.metadata.generation,
        observed,
        sync,
        failure,
        alert_after,
        &now,
    );
    status.applies_as = pass.identity.as_ref().ok().and_then(|i| i.user());
    if ctx.config.shards > 0 {
        status.controller = Some(ctx.config.identity.clone());
    }
    status.project = match pass.project.get() {
        Some(project) => project.clone(),
        None => previous.and_then(|p| p.project.clone()),
    };
    let alert_due = alert::due_in(status.sync.not_synced_since.as_deref(), &now, alert_after);
    let notices = notices(app, previous, &status, &now);
    announce_changes(&ctx.recorder, app, previous, &status, &notices).await;
    for notice in notices {
        ctx.notifier.notify(notice);
    }
    if previous != Some(&status) {
        let key = &pass.key;
        let record_only = observed.is_some_and(|o| o.change == RevisionChange::SameObjects)
            && sync.is_none()
            && failure.is_none()
            && previous.is_some_and(|previous| only_revision_moved(previous, &status));
        if record_only {
            ctx.status_writes.defer(key, status.clone());
        } else {
            ctx.status_writes
                .write(key, &status)
                .await
                .map_err(|error| ReconcileError::Status {
                    app: app.name_any(),
                    error,
                })?;
        }
        ctx.remember_written(key, &pass.memo, status);
    }
    if let Some(failure) = failure {
        tracing::warn!(app = %app.name_any(), reason = failure.step.as_str(), message = %failure.message, "reconcile step failed");
    }
    // Look again when the NotSyncedTooLong alert falls due, and soon
    // after a pass that failed before it could sync (with back-off).
    let resync = jittered(ctx.config.resync);
    let failed_passes = pass.memo.lock().expect("lock").failed_passes;
    let retry = (failure.is_some() && failed_passes > 0)
        .then(|| doubling(failed_passes, FAILED_PASS_RETRY, ctx.config.resync));
    let wait = [Some(resync), alert_due.map(|due| due + ALERT_MARGIN), retry]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(resync);
    Ok(Next::requeue(wait))
}

/// The first wait after a pass that failed before it could sync (an API
/// server that answered 503, a repository that did not answer), doubling
/// per failure in a row up to the resync.
const FAILED_PASS_RETRY: Duration = Duration::from_secs(2);

/// Past the alert's deadline, so the reconcile then finds it overdue.
const ALERT_MARGIN: Duration = Duration::from_millis(200);

/// On an error the controller retries with backoff; reconcile reports its
/// own failures, so this is only reached when status could not be written.
pub fn error_policy(
    _app: Arc<StoredApplication>,
    error: &ReconcileError,
    _ctx: Arc<Context>,
) -> Next {
    tracing::warn!(%error, "reconcile failed");
    Next::requeue(Duration::from_secs(5))
}

fn jittered(period: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let spread = (nanos % 200) as f64 / 1000.0 - 0.1; // ±10%
    period.mul_f64(1.0 + spread)
}

pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}
