//! `tether uninstall`: the controller out of the cluster, its applications'
//! objects left in place.

use std::process::ExitCode;

use super::kubeconfig::Kubeconfig;
use super::out::outln;

/// Remove what `tether install` put in a namespace: the controller's
/// Deployment and Service, its ServiceAccount and RBAC (in every namespace
/// it was granted Secrets in); the cluster-wide roles and admission
/// policies too once no install into another namespace is left.
///
/// The namespace stays: it holds the Applications and the break-glass
/// audit records with the key that seals them. Objects the Applications
/// applied always stay (they are not owned by their Application).
///
/// With `--crds`, also the CRDs, which deletes every Application and
/// BreakGlass in the cluster (their cascade finalizers are removed first,
/// so none of their objects is deleted).
///
/// Example: `tether uninstall --namespace tether-system`
#[derive(Debug, clap::Args)]
pub struct UninstallArgs {
    /// The namespace Tether was installed into.
    #[arg(long, short = 'n', default_value = "tether-system")]
    pub namespace: String,
    /// Also delete the CRDs, and with them every Application.
    #[arg(long)]
    pub crds: bool,
    #[command(flatten)]
    pub kubeconfig: Kubeconfig,
}

pub async fn run(args: UninstallArgs) -> anyhow::Result<ExitCode> {
    if args.crds {
        eprintln!(
            "warning: deleting the CRDs deletes every Application and BreakGlass in the cluster; the objects they applied stay"
        );
    }
    let client = args.kubeconfig.connect().await?;
    for object in
        tether_controller::install::uninstall::uninstall(client, &args.namespace, args.crds).await?
    {
        outln!("{object} {}", tether_core::Action::Deleted);
    }
    Ok(ExitCode::SUCCESS)
}
