//! The loop, for one Application: fetch → observe → diff → apply → report.
//!
//! [`story`] tells the whole story on one screen; each step is one
//! call into a file of this folder: [`project`], [`fetch`] (with [`argocd`]
//! and [`generated`]), [`admit`], [`observe`], [`windows`], [`apply`] (with
//! [`operation`]) and [`report`]. An Application that does not decode is
//! only reported ([`invalid`]); one being deleted is never synced again,
//! and with the cascade finalizer its objects are deleted first
//! ([`cascade`]).

pub mod admit;
pub mod apply;
pub mod argocd;
pub mod cascade;
pub mod dependencies;
pub mod fetch;
pub mod generated;
pub mod hooks;
pub mod invalid;
pub mod observe;
pub mod operation;
pub mod pin;
pub mod project;
pub mod report;
pub mod schedule;
pub mod takeover;
pub mod windows;

use std::fmt::Display;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::controller::Action as Next;
use tether_cluster::Applier;
use tether_core::argocd::Warning;
use tether_core::identity::{Identity, identity};
use tether_core::project::{Membership, Rules};
use tether_core::tracking::AppRef;
use tether_source::Rendered;

use crate::api::{Application, StoredApplication};
use crate::clusters::Target;
use crate::context::Context;
use crate::observe::live::AppKey;
use crate::observe::memo::{AppMemo, RetryPolicy};
use crate::report::status::{Failure, Step};
use crate::request;
use hooks::Hooks;

pub use fetch::FetchError;
pub use report::error_policy;

/// Why a reconcile could not even report (writing status failed).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("Application {app}: writing status failed: {}", tether_cluster::error::describe(.error))]
    Status { app: String, error: kube::Error },
    #[error(transparent)]
    Invalid(invalid::ReportError),
    #[error(
        "Application {app}: removing the cascade finalizer failed: {}",
        tether_cluster::error::describe(.error)
    )]
    Finalizer { app: String, error: kube::Error },
}

/// Reconciles one stored Application: one that does not decode is only
/// reported ([`invalid`]); one being deleted only loses its objects if it
/// asked to ([`cascade`]).
pub async fn reconcile(
    stored: Arc<StoredApplication>,
    ctx: Arc<Context>,
) -> Result<Next, ReconcileError> {
    let deleting = stored.metadata.deletion_timestamp.is_some();
    match &stored.decoded {
        Ok(app) if cascade::cascades(&stored) => cascade::delete(&Pass::new(&ctx, app).await).await,
        Ok(_) if deleting => Ok(Next::await_change()),
        Ok(app) => reconcile_app(&Pass::new(&ctx, app).await).await,
        Err(invalid) => invalid::report(&ctx, &stored, invalid)
            .await
            .map_err(ReconcileError::Invalid),
    }
}

/// Reconciles one Application. Every step's failure is reported with its
/// own reason ([`Step`]); only a failure to report is an error.
async fn reconcile_app(pass: &Pass<'_>) -> Result<Next, ReconcileError> {
    match story(pass).await {
        Ok(next) => Ok(next),
        Err(Stop::Failed(failure)) => pass.fail(failure.step, failure.message).await,
        Err(Stop::Unreported(error)) => Err(error),
    }
}

/// The story of one pass: admit → fetch → observe → diff → apply → report,
/// the details one call away. A step that fails ends it, named by its
/// [`Step`].
async fn story(pass: &Pass<'_>) -> Result<Next, Stop> {
    // Admit the app before anything is fetched ([`admitted`]).
    pass.identity.as_ref().map_err(at(Step::Identity))?;
    let projects = project::projects(pass).await.map_err(at(Step::Project))?;
    let membership = admitted(pass, &projects)?;
    // Fetch the desired state, ready to compare ([`fetched`]).
    let (desired, hooks, unsupported) = fetched(pass, membership).await?;

    // Observe and diff; refuse objects another app holds or nobody gave it.
    let compared = observe::compare(pass, &desired)
        .await
        .map_err(at(Step::Diff))?;
    let admitted = admit::ownership(pass, &compared)
        .await
        .map_err(at(Step::Ownership))?;
    let desired = admit::marked(desired, &compared, &admitted);
    // Classify drift; what open break-glass windows cover is recorded.
    let change = observe::change(pass, &desired);
    let windows = windows::open(pass).await;
    let drift = observe::drift(pass, &compared, &desired.commit, change, &windows);
    windows::record(pass, &windows, &drift).await;

    // Apply a new revision, or re-apply what drifted; then prune orphans.
    let sync = apply::sync(pass, &desired, &compared, &drift, change, &hooks).await;
    takeover::release(pass, &compared, sync.as_ref()).await;
    let compared = generated::created(compared, sync.as_ref());
    let pruned = apply::prune(pass, &compared, change, sync.as_ref()).await;

    // Report: status, events, and when to look again.
    let findings = report::Findings {
        desired: &desired,
        change,
        compared: &compared,
        drift: &drift,
        sync: sync.as_ref(),
        pruned: &pruned,
        unsupported: &unsupported,
        sync_window: pass.sync_window(),
    };
    pass.memo.lock().expect("lock").failed_passes = 0;
    let next = report::findings(pass, &findings).await?;
    let seen = (&windows[..], &drift[..]);
    Ok(report::look_again(
        pass,
        next,
        seen,
        sync.as_ref(),
        &desired.commit,
    ))
}

/// The app's Project, having admitted it: its Project admits its
/// repository and destination; its cluster answers; the apps it depends on
/// are Synced and Healthy; its sync windows say whether automated syncs and
/// self-heal may run, and refuse a `tether sync` they block.
fn admitted<'p>(pass: &Pass<'_>, projects: &'p [(String, Rules)]) -> Result<Membership<'p>, Stop> {
    let membership = project::admit_source(pass, projects).map_err(at(Step::Project))?;
    let _ = pass.project.set(membership.name().map(str::to_string));
    pass.target.reachable().map_err(at(Step::Cluster))?;
    dependencies::ready(pass).map_err(|(step, waiting)| failed(step, waiting))?;
    let sync_window = schedule::verdict(pass, membership).map_err(at(Step::SyncWindow))?;
    schedule::admit_request(pass, sync_window.as_ref()).map_err(at(Step::SyncWindow))?;
    let _ = pass.sync_window.set(sync_window);
    Ok(membership)
}

/// The desired state (at the pinned revision while a rollback holds), with
/// its sync hooks taken out (they run around a sync, never as the app's
/// objects), other Argo CD annotations set aside and said so (with what the
/// hooks leave unapplied), and what the API server named named; objects
/// outside the Project or the destination are refused before any is read.
async fn fetched(
    pass: &Pass<'_>,
    membership: Membership<'_>,
) -> Result<(Rendered, Hooks, Vec<Warning>), Stop> {
    let desired = pin::desired(pass).await.map_err(|e| failed(e.step(), e))?;
    let (desired, hooks, not_applied) = hooks::set_aside(pass, desired)
        .await
        .map_err(at(Step::Validate))?;
    let (desired, mut unsupported) = argocd::set_aside(pass, desired).await;
    unsupported.extend(not_applied);
    let desired = generated::name(pass, desired).await;
    project::admit_objects(pass, membership, &desired.manifests)
        .await
        .map_err(at(Step::Project))?;
    admit::destination(&pass.applier, &pass.app, &desired.manifests)
        .await
        .map_err(at(Step::Destination))?;
    Ok((desired, hooks, unsupported))
}

/// Why [`story`] ended early: a step failed (reported as its reason), or
/// reporting itself failed.
enum Stop {
    Failed(Failure),
    Unreported(ReconcileError),
}

impl From<ReconcileError> for Stop {
    fn from(error: ReconcileError) -> Stop {
        Stop::Unreported(error)
    }
}

/// `step` failed with `error`.
fn failed(step: Step, error: impl Display) -> Stop {
    Stop::Failed(Failure {
        step,
        message: error.to_string(),
    })
}

/// For `map_err`: an error of `step`.
fn at<E: Display>(step: Step) -> impl FnOnce(E) -> Stop {
    move |error| failed(step, error)
}

/// One reconcile of one Application: what every step needs.
pub struct Pass<'a> {
    pub ctx: &'a Context,
    /// The Application, with the status this controller last wrote.
    pub app: Arc<Application>,
    pub key: AppKey,
    pub owner: AppRef,
    /// The cluster its objects go to (`spec.destination.cluster`).
    pub target: Arc<Target>,
    /// Whom this app's changes are made as, or why they may not be made.
    pub identity: Result<Identity, String>,
    /// Applies to the destination namespace, as [`Pass::identity`] (the
    /// controller's own identity when that is refused: nothing is applied
    /// then, only reported).
    pub applier: Applier,
    /// The Project that holds the app, once [`project`] has judged it
    /// (`None` inside: no Project applies).
    pub project: std::sync::OnceLock<Option<String>>,
    pub memo: Arc<Mutex<AppMemo>>,
    /// What the app's sync windows say, once [`schedule`] has judged them
    /// (`None` inside: no windows).
    pub sync_window: std::sync::OnceLock<Option<tether_core::sync_window::Verdict>>,
    /// Checked before each write of this app (the leader's Lease, or the
    /// app's shard Lease when sharded); none outside leader election.
    pub fence: Option<crate::fence::Fence>,
    /// The app's rollback pin, once [`pin`] has judged it (`None` inside:
    /// not pinned).
    pub pin: std::sync::OnceLock<Option<crate::api::pin::PinState>>,
}

impl<'a> Pass<'a> {
    async fn new(ctx: &'a Context, app: &Arc<Application>) -> Pass<'a> {
        let key = (app.namespace().unwrap_or_default(), app.name_any());
        let owner = AppRef::new(&key.0, &key.1);
        let target = ctx
            .clusters
            .target(app.spec.destination.cluster.as_deref(), &key)
            .await;
        target.live.register_owner(owner.label_value(), key.clone());
        let memo = ctx.memo_of(&key, app.metadata.uid.as_deref());
        let app = with_written_status(app, &memo);
        let identity = identity(
            &key.0,
            app.spec.service_account_name.as_deref(),
            &ctx.config.identity_policy,
        )
        .map_err(|refused| refused.to_string());
        let resources = identity
            .as_ref()
            .ok()
            .map(|identity| target.resources_as(identity));
        let (identity, resources) = match resources {
            Some(Ok(resources)) => (identity, resources),
            Some(Err(error)) => (Err(error), target.resources.clone()),
            None => (identity, target.resources.clone()),
        };
        let applier = Applier::new(resources, app.spec.destination.namespace.clone());
        Pass {
            ctx,
            app,
            key: key.clone(),
            owner,
            target,
            identity,
            applier,
            project: std::sync::OnceLock::new(),
            memo,
            sync_window: std::sync::OnceLock::new(),
            fence: ctx.fence.as_ref().map(|fence| fence.for_app(&key)),
            pin: std::sync::OnceLock::new(),
        }
    }

    /// What the app's sync windows say (`None`: it has none, or they
    /// were not judged yet).
    pub fn sync_window(&self) -> Option<&tether_core::sync_window::Verdict> {
        self.sync_window.get().and_then(Option::as_ref)
    }

    /// The app's rollback pin, once fetched (`None`: not pinned).
    pub fn pin_state(&self) -> Option<&crate::api::pin::PinState> {
        self.pin.get().and_then(Option::as_ref)
    }

    /// Whether a rollback's pin holds the app at another revision.
    pub fn pin_holds(&self) -> bool {
        self.pin_state()
            .is_some_and(|state| state.verdict == tether_core::rollback::PinVerdict::Hold)
    }

    /// Whether a `tether sync` of the app is pending.
    pub fn requested(&self) -> bool {
        self.app
            .annotations()
            .contains_key(crate::api::application::SYNC_REQUEST_ANNOTATION)
    }

    /// How this app's failed syncs are retried: its `syncPolicy.retry`,
    /// then once per resync interval.
    pub fn retry_policy(&self) -> RetryPolicy {
        let retry = &self.app.spec.sync_policy.retry;
        RetryPolicy {
            limit: retry.limit,
            base: Duration::from_secs(retry.backoff_seconds.into()),
            max: Duration::from_secs(retry.max_backoff_seconds.into()),
            periodic: self.ctx.config.resync,
        }
    }

    /// How long this app may stay not Synced before `NotSyncedTooLong`.
    pub fn alert_after(&self) -> Duration {
        self.app
            .spec
            .sync_policy
            .alert_after(self.ctx.config.alert_not_synced_after)
    }

    /// What prune works on in this pass: the target's live objects,
    /// deleted as the app's identity, while this replica holds the fence.
    pub fn prune_cluster(&self) -> crate::sync::prune::Cluster<'_> {
        crate::sync::prune::Cluster {
            live: &self.target.live,
            resources: &self.target.resources,
            applier: &self.applier,
            fence: self.fence.as_ref(),
        }
    }

    /// Reports that `step` failed with `error`, and ends the reconcile. A
    /// pending `tether sync` request is answered by this failure: it is
    /// dropped once the status says why, so the command can show it.
    pub(crate) async fn fail(
        &self,
        step: Step,
        error: impl Display,
    ) -> Result<Next, ReconcileError> {
        let failure = Failure {
            step,
            message: error.to_string(),
        };
        self.memo.lock().expect("lock").failed_passes += 1;
        let next = report::status(self, None, None, Some(&failure)).await?;
        request::clear(&self.ctx.client, &self.app).await;
        Ok(next)
    }

    /// Before a write that changes part of the stored status (a sync's
    /// progress: `operationState` Running, which clears the hook or wave
    /// the sync waits on), holds the status this pass works from as the
    /// controller's own, so the next pass reads it and not the partial
    /// write, until the next full status write.
    pub fn hold_status(&self) {
        let mut memo = self.memo.lock().expect("lock");
        if memo.written_status.is_none() {
            memo.written_status = self.app.status.clone().map(Box::new);
        }
        memo.status_held = true;
    }
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
            latest.status = Some(*written);
            Arc::new(latest)
        }
        None => app.clone(),
    }
}

/// The identity the API server gives `manifest`'s object. A kind not served
/// yet (its CRD may be in this very commit) keeps the identity it declares.
async fn identify(applier: &Applier, manifest: &tether_source::Manifest) -> tether_core::ObjectRef {
    applier
        .identify(&manifest.object)
        .await
        .unwrap_or_else(|_| manifest.id.clone())
}
