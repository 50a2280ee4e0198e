//! `tether sync APP`: ask the controller to sync an Application now and
//! follow it to the end; `tether sync --path DIR`: apply a directory of
//! manifests once. `--dry-run` shows what either would change.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::runtime::watcher;
use tether_controller::api::Application;
use tether_controller::api::application::condition_with;
use tether_controller::report::status::RECONCILED_CONDITION;
use tether_controller::request::{SyncRequest, pending, request_sync_with};
use tether_controller::sync::preview::{Preview, preview, preview_application};
use tether_core::ConditionStatus::False;
use tether_core::{Action, OperationPhase};

use super::kubeconfig::Kubeconfig;
use super::local::{Directory, repositories};
use super::out::outln;
use super::selection::application;

/// Sync an Application now: the controller applies its whole desired state
/// (at `--revision` for this once) and `tether sync` follows it, printing
/// progress, until it ends. Or validate a directory of manifests by
/// server-side dry-run, then apply it with server-side apply (field manager
/// `tether`) in dependency order. `--dry-run` prints what would be created,
/// configured or left unchanged, and applies nothing.
///
/// Exit codes: 0 synced (or dry run done), 1 the sync failed, 2 error.
///
/// Examples: `tether sync shop` · `tether sync shop --revision v1.2.0` ·
/// `tether sync shop --dry-run` · `tether sync shop --allow-mass-prune` ·
/// `tether sync --path examples/shop --namespace shop --app shop`
#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    /// The Application to sync (in `--namespace`, default tether-system).
    #[arg(conflicts_with = "path", required_unless_present = "path")]
    pub application: Option<String>,
    /// Confirm a prune the circuit breaker stopped (an empty render, or more
    /// than the app's share of its objects).
    #[arg(long, requires = "application")]
    pub allow_mass_prune: bool,
    /// Sync to this branch, tag or commit, this once, instead of the
    /// Application's revision (an automated Application goes back to its
    /// own revision on the next commit or resync).
    #[arg(long, requires = "application")]
    pub revision: Option<String>,
    /// Print what would change, per object, and apply nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Ask for the sync and return, without following it.
    #[arg(long, requires = "application", conflicts_with = "dry_run")]
    pub no_wait: bool,
    /// How long to follow the sync before giving up, in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Directory of YAML/JSON manifests.
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// The Application's namespace; with `--path`, the namespace for
    /// objects that do not name one (default `default`).
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Application name the objects are tracked under.
    #[arg(long)]
    pub app: Option<String>,
    #[command(flatten)]
    pub kubeconfig: Kubeconfig,
}

pub async fn run(args: SyncArgs) -> anyhow::Result<ExitCode> {
    let client = args.kubeconfig.connect().await?;
    let Some(path) = &args.path else {
        let name = args.application.as_deref().unwrap_or_default();
        let namespace = args.namespace.as_deref().unwrap_or("tether-system");
        if args.dry_run {
            return dry_run_app(client, namespace, name, args.revision.as_deref()).await;
        }
        return sync_app(client, namespace, name, &args).await;
    };
    let Directory {
        manifests,
        applier,
        app,
    } = Directory::render(client, path, args.namespace.as_deref(), args.app.as_deref())?;
    if args.dry_run {
        let previews = preview(&applier, &app, &manifests, &[], None).await?;
        print_dry_run(&previews);
        return Ok(ExitCode::SUCCESS);
    }
    let report = tether_controller::sync_manifests(&applier, &app, &manifests).await?;
    for (object, action) in &report.results {
        outln!("{object} {action}");
    }
    let actions: Vec<Action> = report.results.iter().map(|(_, a)| *a).collect();
    outln!("sync complete: {}", summary(&actions));
    Ok(ExitCode::SUCCESS)
}

/// Requests the sync, then follows the Application until the controller
/// has handled the request, printing progress as it reports it.
async fn sync_app(
    client: Client,
    namespace: &str,
    name: &str,
    args: &SyncArgs,
) -> anyhow::Result<ExitCode> {
    let request = SyncRequest {
        allow_mass_prune: args.allow_mass_prune,
        revision: args.revision.clone(),
    };
    let api: Api<Application> = Api::namespaced(client.clone(), namespace);
    let requested_at = request_sync_with(client, namespace, name, &request).await?;
    let at = match &args.revision {
        Some(revision) => format!(" at {revision}"),
        None => String::new(),
    };
    let confirmed = if args.allow_mass_prune {
        " (mass prune confirmed)"
    } else {
        ""
    };
    outln!("sync of {namespace}/{name}{at} requested{confirmed}");
    if args.no_wait {
        return Ok(ExitCode::SUCCESS);
    }

    // Follow the sync until the request is handled.
    let follow = async {
        let mut shown = String::new();
        let mut updates = std::pin::pin!(watcher::watch_object(api, name));
        while let Some(update) = updates.next().await {
            let Some(app) = update.with_context(|| format!("watching {namespace}/{name}"))? else {
                anyhow::bail!("Application {namespace}/{name} was deleted");
            };
            if !pending(&app, &requested_at) {
                return Ok(app);
            }
            if let Some(operation) = app.status.as_ref().and_then(|s| s.operation_state.as_ref())
                && operation.phase == OperationPhase::Running
                && operation.message != shown
            {
                outln!("{}", operation.message);
                shown = operation.message.clone();
            }
        }
        anyhow::bail!("watching {namespace}/{name} ended")
    };
    let app = tokio::time::timeout(Duration::from_secs(args.timeout), follow)
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "Application {namespace}/{name}: the sync did not finish within {}s",
                args.timeout
            )
        })??;

    // Report how it ended.
    let status = app.status.unwrap_or_default();
    if let Some(failed) = condition_with(&status.conditions, RECONCILED_CONDITION, False) {
        outln!(
            "sync of {namespace}/{name} failed: {}: {}",
            failed.reason,
            failed.message
        );
        return Ok(ExitCode::from(1));
    }
    let Some(operation) = status.operation_state else {
        anyhow::bail!("Application {namespace}/{name}: no sync was recorded");
    };
    if operation.phase != OperationPhase::Succeeded {
        outln!("sync of {namespace}/{name} failed: {}", operation.message);
        return Ok(ExitCode::from(1));
    }
    let actions: Vec<Action> = operation.changes.iter().map(|c| c.action).collect();
    outln!(
        "synced {namespace}/{name} to {}: {}",
        operation.revision,
        summary(&actions)
    );
    Ok(ExitCode::SUCCESS)
}

/// Fetches the Application's source (at `revision`, if given) and prints
/// what a sync would do to each object.
async fn dry_run_app(
    client: Client,
    namespace: &str,
    name: &str,
    revision: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let app = application(client.clone(), namespace, name).await?;
    let preview = preview_application(&client, &app, revision, repositories()).await?;
    outln!("dry run of {namespace}/{name} at {}", preview.commit);
    print_dry_run(&preview.previews);
    Ok(ExitCode::SUCCESS)
}

fn print_dry_run(previews: &[Preview]) {
    let actions: Vec<Action> = previews.iter().map(action_of).collect();
    for (preview, action) in previews.iter().zip(&actions) {
        outln!("{} {action} (dry run)", preview.id);
    }
    outln!("dry run: {}; nothing applied", summary(&actions));
}

/// What a sync would do to the previewed object, in the sync's words.
fn action_of(preview: &Preview) -> Action {
    match &preview.diff {
        None => Action::Created,
        Some(_) if preview.changes() => Action::Configured,
        Some(_) => Action::Unchanged,
    }
}

/// `2 created, 1 unchanged`, in the order of [`Action::ALL`].
fn summary(actions: &[Action]) -> String {
    let count = |action: Action| actions.iter().filter(|a| **a == action).count();
    let parts: Vec<String> = Action::ALL
        .iter()
        .filter(|action| count(**action) > 0)
        .map(|action| format!("{} {action}", count(*action)))
        .collect();
    if parts.is_empty() {
        "no objects".into()
    } else {
        parts.join(", ")
    }
}
