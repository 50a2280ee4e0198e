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
    /// Also run the controller in the cluster: a Deployment of this image.
    #[arg(long)]
    pub deployment_image: Option<String>,
    /// Print the manifests as JSON instead of applying them.
    #[arg(long)]
    pub print: bool,
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, env = "TETHER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

pub async fn run(args: InstallArgs) -> anyhow::Result<ExitCode> {
    let deployment = args
        .deployment_image
        .as_deref()
        .map(|image| tether_controller::install::deployment(&args.namespace, image));
    if args.print {
        let manifests = tether_controller::install::manifests(&args.namespace);
        for manifest in manifests.iter().chain(deployment.as_ref()) {
            println!("{}", serde_json::to_string_pretty(manifest)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let client = tether_cluster::connect(args.kubeconfig.as_deref()).await?;
    for (object, action) in
        tether_controller::install::install(client.clone(), &args.namespace).await?
    {
        println!("{object} {action}");
    }
    if let Some(deployment) = deployment {
        let applier = tether_cluster::Applier::new(
            tether_cluster::Resources::new(client),
            args.namespace.clone(),
        );
        let applied = applier.apply(&deployment, false).await?;
        println!("{} {}", applied.object, applied.action);
    }
    Ok(ExitCode::SUCCESS)
}
