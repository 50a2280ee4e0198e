//! `tether sync APP`: ask the controller to sync an Application now;
//! `tether sync --path DIR`: apply a directory of manifests once.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use tether_core::Action;
use tether_core::tracking::AppRef;

/// Sync an Application now (the controller applies its whole desired
/// state), optionally confirming a prune its circuit breaker stopped; or
/// validate a directory of manifests by server-side dry-run, then apply it
/// with server-side apply (field manager `tether`) in dependency order.
///
/// Examples: `tether sync shop --allow-mass-prune`,
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
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, env = "TETHER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

pub async fn run(args: SyncArgs) -> anyhow::Result<ExitCode> {
    let client = tether_cluster::connect(args.kubeconfig.as_deref()).await?;
    let Some(path) = &args.path else {
        let name = args.application.as_deref().unwrap_or_default();
        let namespace = args.namespace.as_deref().unwrap_or("tether-system");
        tether_controller::request::request_sync(client, namespace, name, args.allow_mass_prune)
            .await
            .with_context(|| format!("Application {namespace}/{name}"))?;
        let confirmed = if args.allow_mass_prune {
            " (mass prune confirmed)"
        } else {
            ""
        };
        println!("sync of {namespace}/{name} requested{confirmed}");
        return Ok(ExitCode::SUCCESS);
    };
    let namespace = args.namespace.clone().unwrap_or_else(|| "default".into());
    let manifests = tether_source::render_directory(path)
        .with_context(|| format!("rendering {}", path.display()))?;
    let applier =
        tether_cluster::Applier::new(tether_cluster::Resources::new(client), namespace.clone());
    let app_name = match &args.app {
        Some(name) => name.clone(),
        None => directory_name(path),
    };
    let app = AppRef::new(namespace, app_name);
    let report = tether_controller::sync_manifests(&applier, &app, &manifests).await?;
    for (object, action) in &report.results {
        println!("{object} {action}");
    }
    let summary: Vec<String> = Action::ALL
        .iter()
        .filter(|action| report.count(**action) > 0)
        .map(|action| format!("{} {action}", report.count(*action)))
        .collect();
    println!("sync complete: {}", summary.join(", "));
    Ok(ExitCode::SUCCESS)
}

fn directory_name(path: &std::path::Path) -> String {
    path.canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "app".into())
}
