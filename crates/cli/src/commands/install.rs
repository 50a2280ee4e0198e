//! `tether install`: the CRDs and the controller's identity and RBAC.

use std::path::PathBuf;
use std::process::ExitCode;

/// Install Tether's CRDs (Application), its namespace, service account and
/// RBAC into the cluster, with server-side apply. Safe to run again.
///
/// Example: `tether install --namespace tether-system`
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// Namespace for the controller's service account.
    #[arg(long, short = 'n', default_value = "tether-system")]
    pub namespace: String,
    /// Print the manifests as JSON instead of applying them.
    #[arg(long)]
    pub print: bool,
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, env = "TETHER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

pub async fn run(args: InstallArgs) -> anyhow::Result<ExitCode> {
    if args.print {
        for manifest in tether_controller::install::manifests(&args.namespace) {
            println!("{}", serde_json::to_string_pretty(&manifest)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let client = tether_cluster::connect(args.kubeconfig.as_deref()).await?;
    for (object, action) in tether_controller::install::install(client, &args.namespace).await? {
        println!("{object} {action}");
    }
    Ok(ExitCode::SUCCESS)
}
