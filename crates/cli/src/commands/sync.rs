//! `tether sync --path DIR`: apply a directory of manifests once.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use tether_core::Action;
use tether_core::tracking::AppRef;

/// Validate a directory of manifests by server-side dry-run, then apply it
/// with server-side apply (field manager `tether`) in dependency order, and
/// print what happened to each object.
///
/// Example: `tether sync --path examples/shop --namespace shop --app shop`
#[derive(Debug, clap::Args)]
pub struct SyncArgs {
    /// Directory of YAML/JSON manifests.
    #[arg(long)]
    pub path: PathBuf,
    /// Namespace for objects that do not name one.
    #[arg(long, short = 'n', default_value = "default")]
    pub namespace: String,
    /// Application name the objects are tracked under.
    #[arg(long)]
    pub app: Option<String>,
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, env = "TETHER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

pub async fn run(args: SyncArgs) -> anyhow::Result<ExitCode> {
    let manifests = tether_source::render_directory(&args.path)
        .with_context(|| format!("rendering {}", args.path.display()))?;
    let client = tether_cluster::connect(args.kubeconfig.as_deref()).await?;
    let applier = tether_cluster::Applier::new(
        tether_cluster::Resources::new(client),
        args.namespace.clone(),
    );
    let app_name = match &args.app {
        Some(name) => name.clone(),
        None => directory_name(&args.path),
    };
    let app = AppRef::new(args.namespace.clone(), app_name);
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
