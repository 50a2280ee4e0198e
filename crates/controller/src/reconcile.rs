//! The loop, for one Application: fetch → observe → diff → apply → report.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action as Next;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use tether_cluster::Applier;
use tether_core::drift::{DriftKind, WindowScope};
use tether_core::prune::PruneOptions;
use tether_core::revision::{LastSync, RevisionChange, revision_change};
use tether_core::tracking::AppRef;
use tether_core::{Initiator, ObjectRef, OperationPhase};
use tether_source::{Manifest, Rendered, SourceError};

use crate::api::application::{
    ALLOW_MASS_PRUNE_ANNOTATION, SYNC_REQUEST_ANNOTATION, SYNC_REVISION_ANNOTATION,
};
use crate::api::{Application, StoredApplication};
use crate::break_glass;
use crate::compare::{Compared, compare_all};
use crate::context::Context;
use crate::drift::{self, Assessed, Policy as DriftPolicy, Response};
use crate::memo::AppMemo;
use crate::operation::sync_operation;
use crate::prune::{self, PruneReport};
use crate::request::requested_revision;
use crate::status::{
    Failure, Observed, PRUNE_BLOCKED_CONDITION, Step, SyncRun, next_status, only_revision_moved,
};
use crate::sync::{SyncError, SyncReport, reapply};
use crate::{admit, invalid};

/// Why a reconcile could not even report (writing status failed).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("Application {app}: writing status failed: {error}")]
    Status { app: String, error: kube::Error },
    #[error(transparent)]
    Invalid(invalid::ReportError),
}

/// Reconciles one stored Application: one that does not decode is only
/// reported ([`crate::invalid`]).
pub async fn reconcile(
    stored: Arc<StoredApplication>,
    ctx: Arc<Context>,
) -> Result<Next, ReconcileError> {
    match &stored.decoded {
        Ok(app) => reconcile_app(app.clone(), ctx).await,
        Err(invalid) => invalid::report(&ctx, &stored, invalid)
            .await
            .map_err(ReconcileError::Invalid),
    }
}

/// Reconciles one Application. Every step's failure is reported through
/// [`report`] with its own reason; only a failure to report is an error.
async fn reconcile_app(app: Arc<Application>, ctx: Arc<Context>) -> Result<Next, ReconcileError> {
    let key = (app.namespace().unwrap_or_default(), app.name_any());
    let owner = AppRef::new(&key.0, &key.1);
    ctx.live.register_owner(owner.label_value(), key.clone());
    let memo = ctx.memo_of(&key, app.metadata.uid.as_deref());
    let app = with_written_status(&app, &memo);
    let applier = Applier::new(
        ctx.resources.clone(),
        app.spec.destination.namespace.clone(),
    );
    let fail = |step, message| Failure { step, message };

    // Fetch the desired state.
    let mut desired = match fetch(&ctx, &app).await {
        Ok(desired) => desired,
        Err(error) => {
            let failure = fail(error.step(), error.to_string());
            return report(&ctx, &app, None, None, Some(&failure)).await;
        }
    };

    // Refuse objects outside the destination before reading any of them.
    if let Err(refused) = admit::destination(&applier, &app, &desired.manifests).await {
        let failure = fail(Step::Destination, refused.to_string());
        return report(&ctx, &app, None, None, Some(&failure)).await;
    }

    // Observe and diff.
    let ignore = &app.spec.ignore_differences;
    let compared =
        match compare_all(&ctx, &applier, &owner, &desired.manifests, ignore, &memo).await {
            Ok(compared) => compared,
            Err(error) => {
                let failure = fail(Step::Diff, error.to_string());
                return report(&ctx, &app, None, None, Some(&failure)).await;
            }
        };

    // Refuse objects another app holds or nobody gave this app.
    match admit::ownership(&ctx, &app, &owner, &compared).await {
        Ok(admitted) if !admitted.adopted.is_empty() => {
            desired.manifests = Arc::new(admit::mark(&desired.manifests, &compared, &admitted));
        }
        Ok(_) => {}
        Err(refused) => {
            let failure = fail(Step::Ownership, refused.to_string());
            return report(&ctx, &app, None, None, Some(&failure)).await;
        }
    }

    // Classify drift and decide what self-heal may revert; record what
    // changed inside open break-glass windows.
    let change = revision_change(last_sync(&app), &desired.commit, &desired.digest);
    let new_revision = change == RevisionChange::New;
    let windows = break_glass::windows_of(&ctx, &app, &owner).await;
    let scopes: Vec<_> = windows.iter().map(|w| w.scope.clone()).collect();
    let drift = assess_drift(
        &app,
        &owner,
        &compared,
        &memo,
        &desired.commit,
        new_revision,
        &scopes,
    );
    break_glass::record(&ctx, &app, &windows, &drift).await;

    // Apply a new revision, or re-apply what drifted.
    let sync = apply(
        &ctx,
        &app,
        &applier,
        &owner,
        &desired,
        &compared,
        &drift,
        new_revision,
    )
    .await;

    // Prune orphans, after apply.
    let synced = sync.as_ref().is_none_or(|s| s.result.is_ok()) && !new_revision
        || sync.as_ref().is_some_and(|s| s.result.is_ok());
    let pruned = prune_orphans(&ctx, &app, &applier, &owner, &compared, synced).await;

    // Report.
    let health = ctx.health.for_app(&key, &app.spec.health.rules);
    let observed = Observed {
        revision: &desired.commit,
        tree: &desired.tree,
        digest: &desired.digest,
        change,
        compared: &compared,
        health: &health,
        drift: &drift,
        prune: &pruned,
    };
    announce(&ctx, &app, &drift, sync.as_ref(), &pruned).await;
    let run = sync.as_ref().map(|sync| SyncRun {
        revision: &desired.commit,
        initiator: sync.initiator,
        started_at: &sync.started_at,
        outcome: sync
            .result
            .as_ref()
            .map_err(|error| (error.to_string(), error.applied())),
    });
    let failure = match &sync {
        Some(ran) => ran
            .result
            .as_ref()
            .err()
            .map(|error| fail(Step::Apply, error.to_string())),
        None => failure_in_force(&app, &desired.commit, &compared),
    };
    let next = report(&ctx, &app, Some(&observed), run.as_ref(), failure.as_ref()).await?;
    clear_requests(&ctx, &app).await;
    let next = break_glass::until_expiry(next, &windows, ctx.config.resync);
    Ok(back_off_aware(next, &drift))
}

/// What the last successful sync recorded in status.
fn last_sync(app: &Application) -> Option<LastSync<'_>> {
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

/// A failed sync of this very revision that no sync has replaced yet (it
/// is waiting out its backoff): its failure still stands, so a reconcile
/// in between must not report success.
fn failure_in_force(app: &Application, revision: &str, compared: &[Compared]) -> Option<Failure> {
    let operation = app.status.as_ref()?.operation_state.as_ref()?;
    let pending = compared.iter().any(|c| !c.in_sync());
    (operation.phase == OperationPhase::Failed && operation.revision == revision && pending).then(
        || Failure {
            step: Step::Apply,
            message: operation.message.clone(),
        },
    )
}

/// `app` with the status this controller last wrote, when it has written
/// one. The watch cache can lag behind that write (a reconcile woken by the
/// objects it just applied may run before the cache sees its own status), and
/// working from a stale status would rewrite it without the revision and
/// history just recorded.
fn with_written_status(app: &Arc<Application>, memo: &Mutex<AppMemo>) -> Arc<Application> {
    match memo.lock().expect("lock").written_status.clone() {
        Some(written) => {
            let mut latest = (**app).clone();
            latest.status = Some(written);
            Arc::new(latest)
        }
        None => app.clone(),
    }
}

/// A sync this reconcile ran.
struct Ran {
    initiator: Initiator,
    started_at: String,
    result: Result<SyncReport, SyncError>,
}

/// Classifies each drifted object and, through the app's flap guard,
/// decides whether to revert it.
fn assess_drift(
    app: &Application,
    owner: &AppRef,
    compared: &[Compared],
    memo: &Mutex<AppMemo>,
    revision: &str,
    pending: bool,
    windows: &[WindowScope],
) -> Vec<Assessed> {
    let inventory = app
        .status
        .as_ref()
        .map(|s| s.inventory.as_slice())
        .unwrap_or_default();
    let policy = DriftPolicy {
        app: owner,
        inventory,
        pending,
        heals: app.spec.sync_policy.heals(),
        windows,
        interrupted: pending && drift::interrupted(app.status.as_ref(), revision),
    };
    let mut memo = memo.lock().expect("lock");
    drift::assess(
        &policy,
        compared,
        &mut memo.flaps,
        SystemTime::now(),
        &now(),
    )
}

/// Syncs everything for a new revision (when automated) or an explicit
/// `tether sync`; otherwise re-applies only the objects self-heal reverts.
#[allow(clippy::too_many_arguments)]
async fn apply(
    ctx: &Context,
    app: &Application,
    applier: &Applier,
    owner: &AppRef,
    desired: &Rendered,
    compared: &[Compared],
    drift: &[Assessed],
    new_revision: bool,
) -> Option<Ran> {
    let policy = &app.spec.sync_policy;
    let memo = ctx.memo(&(app.namespace().unwrap_or_default(), app.name_any()));
    let requested = app.annotations().contains_key(SYNC_REQUEST_ANNOTATION);
    let heal: Vec<&Assessed> = drift
        .iter()
        .filter(|d| d.response == Response::Heal)
        .collect();
    let everything = requested || new_revision && policy.automated;
    if !everything && (heal.is_empty() || !policy.automated) {
        return None;
    }
    let (base, max) = (
        Duration::from_secs(policy.retry.backoff_seconds.into()),
        Duration::from_secs(policy.retry.max_backoff_seconds.into()),
    );
    let may_sync =
        memo.lock()
            .expect("lock")
            .may_sync(&desired.commit, policy.retry.limit, base, max);
    if !may_sync && !requested {
        return None;
    }
    let started_at = now();
    let (initiator, result) = if everything {
        let initiator = if requested {
            Initiator::User
        } else {
            Initiator::Automated
        };
        publish(
            ctx,
            app,
            EventType::Normal,
            "SyncStarted",
            format!(
                "{initiator} sync of {} object(s) to {}",
                desired.manifests.len(),
                &desired.commit
            ),
        )
        .await;
        // A new revision does not overwrite what an open break-glass
        // window keeps: those objects wait for the window to end.
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
        mark_running(ctx, app, &desired.commit, &started_at, manifests.len()).await;
        let result = sync_operation(
            ctx,
            app,
            applier,
            owner,
            &manifests,
            compared,
            &desired.commit,
            &started_at,
        )
        .await;
        (initiator, result)
    } else {
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
        (
            Initiator::SelfHeal,
            reapply(applier, owner, &manifests, &versions).await,
        )
    };
    let mut memo = memo.lock().expect("lock");
    match &result {
        Ok(report) => {
            memo.succeed();
            for applied in &report.applied {
                memo.remember_applied(applied);
            }
        }
        Err(_) => {
            memo.fail(&desired.commit);
        }
    }
    Some(Ran {
        initiator,
        started_at,
        result,
    })
}

/// Records in status that a sync to `revision` is under way, so that a
/// controller that stops mid-sync leaves a trace: the next reconcile sees
/// `Running` and classifies the half-applied objects as Accidental drift.
async fn mark_running(
    ctx: &Context,
    app: &Application,
    revision: &str,
    started_at: &str,
    objects: usize,
) {
    let key = (app.namespace().unwrap_or_default(), app.name_any());
    let _turn = ctx.status_writes.exclusive(&key).await;
    let api: Api<Application> = Api::namespaced(ctx.client.clone(), &key.0);
    let patch = serde_json::json!({"status": {"operationState": {
        "phase": OperationPhase::Running,
        "message": format!("applying {objects} object(s)"),
        "revision": revision,
        "startedAt": started_at,
        "finishedAt": null,
        "changes": null,
    }}});
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

/// Prunes the app's orphans (deleting only when the app prunes and live is
/// at the desired revision); always reports them.
async fn prune_orphans(
    ctx: &Context,
    app: &Application,
    applier: &Applier,
    owner: &AppRef,
    compared: &[Compared],
    synced: bool,
) -> PruneReport {
    let policy = &app.spec.sync_policy;
    let inventory = app
        .status
        .as_ref()
        .map(|s| s.inventory.as_slice())
        .unwrap_or_default();
    let desired: Vec<ObjectRef> = compared.iter().map(|c| c.id.clone()).collect();
    let options = PruneOptions {
        prune: policy.prune && synced,
        max_share: policy.prune_max_share(),
        allow_mass_prune: app.annotations().contains_key(ALLOW_MASS_PRUNE_ANNOTATION),
        prune_adopted: policy.prune_adopted,
    };
    let propagation = policy.prune_propagation.unwrap_or_default();
    prune::prune(
        ctx,
        applier,
        owner,
        inventory,
        &desired,
        &options,
        propagation,
    )
    .await
}

/// Events: a sync's outcome, drift reverted or left, a tripped breaker.
async fn announce(
    ctx: &Context,
    app: &Application,
    drift: &[Assessed],
    sync: Option<&Ran>,
    pruned: &PruneReport,
) {
    let previous = app.status.as_ref();
    let healed = sync.is_some_and(|s| s.result.is_ok());
    for assessed in drift {
        let known = previous.is_some_and(|p| {
            p.drift.iter().any(|e| {
                e.record.object == assessed.record.object
                    && e.record.fields == assessed.record.fields
            })
        });
        match &assessed.response {
            Response::Heal if healed => {
                publish(
                    ctx,
                    app,
                    EventType::Normal,
                    "DriftReverted",
                    format!("reverted {assessed}"),
                )
                .await
            }
            Response::Heal => {}
            _ if known => {}
            Response::Report if assessed.record.kind == DriftKind::Emergency => {
                publish(
                    ctx,
                    app,
                    EventType::Warning,
                    "EmergencyChange",
                    format!(
                        "{assessed}; inside an open break-glass window: recorded, not reverted"
                    ),
                )
                .await
            }
            Response::Report => {
                publish(
                    ctx,
                    app,
                    EventType::Warning,
                    "DriftDetected",
                    format!("{assessed}; not reverted (self-heal is off, warn mode or opted out)"),
                )
                .await
            }
            Response::BackOff(fight) => {
                publish(
                    ctx,
                    app,
                    EventType::Warning,
                    "SelfHealBackOff",
                    fight.to_string(),
                )
                .await
            }
        }
    }
    match sync {
        Some(Ran {
            initiator: Initiator::SelfHeal,
            result: Ok(_),
            ..
        }) => {}
        Some(Ran {
            result: Ok(report), ..
        }) => {
            publish(
                ctx,
                app,
                EventType::Normal,
                "SyncSucceeded",
                format!("synced {} object(s)", report.results.len()),
            )
            .await
        }
        Some(Ran {
            result: Err(error), ..
        }) => {
            publish(
                ctx,
                app,
                EventType::Warning,
                "SyncFailed",
                error.to_string(),
            )
            .await
        }
        None => {}
    }
    for (object, fate) in &pruned.orphans {
        let before =
            previous.and_then(|p| p.orphans.iter().find(|o| o.object == object.to_string()));
        if fate.is_deleted() {
            publish(
                ctx,
                app,
                EventType::Normal,
                "Pruned",
                format!("{object}: deleted"),
            )
            .await;
        } else if before.is_none() {
            publish(
                ctx,
                app,
                EventType::Normal,
                "OrphanDetected",
                format!("{object}: no longer in Git; {fate}"),
            )
            .await;
        }
    }
    let was_blocked = previous.is_some_and(|p| {
        p.conditions
            .iter()
            .any(|c| c.type_ == PRUNE_BLOCKED_CONDITION && c.status == "True")
    });
    if let Some(breaker) = &pruned.breaker
        && !was_blocked
    {
        publish(
            ctx,
            app,
            EventType::Warning,
            "PruneBlocked",
            breaker.to_string(),
        )
        .await;
    }
}

/// Removes the handled `tether sync` annotations from the Application.
async fn clear_requests(ctx: &Context, app: &Application) {
    let annotations = app.annotations();
    if !annotations.contains_key(SYNC_REQUEST_ANNOTATION)
        && !annotations.contains_key(ALLOW_MASS_PRUNE_ANNOTATION)
    {
        return;
    }
    let api: Api<Application> =
        Api::namespaced(ctx.client.clone(), &app.namespace().unwrap_or_default());
    let patch = serde_json::json!({"metadata": {"annotations": {
        SYNC_REQUEST_ANNOTATION: null, ALLOW_MASS_PRUNE_ANNOTATION: null,
        SYNC_REVISION_ANNOTATION: null}}});
    if let Err(error) = api
        .patch(
            &app.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        tracing::warn!(app = %app.name_any(), %error, "clearing the sync request failed");
    }
}

/// Looks again when the earliest flap-guard back-off ends, if sooner.
fn back_off_aware(next: Next, drift: &[Assessed]) -> Next {
    let until = drift
        .iter()
        .filter_map(|d| match &d.response {
            Response::BackOff(fight) => Some(fight.until),
            _ => None,
        })
        .min();
    match until {
        Some(until) => {
            let wait = until.duration_since(SystemTime::now()).unwrap_or_default();
            Next::requeue(wait + Duration::from_millis(50))
        }
        None => next,
    }
}

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

/// Why the desired state could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The repository credentials the source names are not usable.
    #[error(transparent)]
    Credentials(#[from] crate::credentials::CredentialsError),
    #[error("the repository Secret watch stopped")]
    SecretWatchStopped,
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("fetch task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl FetchError {
    /// The step that failed: verifying and rendering have their own.
    pub fn step(&self) -> Step {
        match self {
            FetchError::Source(SourceError::Verify(_)) => Step::Verify,
            FetchError::Source(SourceError::Render(_)) => Step::Render,
            _ => Step::Fetch,
        }
    }
}

/// Fetches the source at its revision, or at the one a pending `tether
/// sync --revision` asks for. A requested revision that cannot be fetched
/// is reported and the request dropped, so it cannot wedge the app.
async fn fetch(ctx: &Context, app: &Application) -> Result<Rendered, FetchError> {
    let repositories = ctx.repositories.clone();
    let mut source = app.spec.source.clone();
    let requested = requested_revision(app).map(str::to_string);
    if let Some(revision) = &requested {
        source.revision = revision.clone();
    }
    if source.secret_ref.is_some() && !ctx.secrets_ready.wait().await {
        return Err(FetchError::SecretWatchStopped);
    }
    let namespace = app.namespace().unwrap_or_default();
    let credentials = crate::credentials::for_source(&ctx.secrets, &namespace, &source)?;
    let fetched =
        tokio::task::spawn_blocking(move || repositories.fetch(&source, credentials.as_ref()))
            .await?
            .map_err(FetchError::from);
    if fetched.is_err() && requested.is_some() {
        clear_requests(ctx, app).await;
    }
    fetched
}

/// Writes the next status when it differs from the current one, and says
/// when to look again.
async fn report(
    ctx: &Context,
    app: &Application,
    observed: Option<&Observed<'_>>,
    sync: Option<&SyncRun<'_>>,
    failure: Option<&Failure>,
) -> Result<Next, ReconcileError> {
    let previous = app.status.as_ref();
    let status = next_status(
        previous,
        app.metadata.generation,
        observed,
        sync,
        failure,
        &now(),
    );
    if previous != Some(&status) {
        let key = (app.namespace().unwrap_or_default(), app.name_any());
        let record_only = observed.is_some_and(|o| o.change == RevisionChange::SameObjects)
            && sync.is_none()
            && failure.is_none()
            && previous.is_some_and(|previous| only_revision_moved(previous, &status));
        if record_only {
            ctx.status_writes.defer(&key, status.clone());
        } else {
            ctx.status_writes
                .write(&key, &status)
                .await
                .map_err(|error| ReconcileError::Status {
                    app: app.name_any(),
                    error,
                })?;
        }
        ctx.memo(&key).lock().expect("lock").written_status = Some(status);
    }
    if let Some(failure) = failure {
        tracing::warn!(app = %app.name_any(), reason = failure.step.as_str(), message = %failure.message, "reconcile step failed");
    }
    Ok(Next::requeue(jittered(ctx.config.resync)))
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
