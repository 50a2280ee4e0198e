//! The one flag every command that talks to a cluster has.

use std::path::PathBuf;

/// Which cluster, as the user running the command: `--kubeconfig`.
#[derive(Debug, Clone, clap::Args)]
pub struct Kubeconfig {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config or in-cluster).
    #[arg(long, env = "TETHER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

impl Kubeconfig {
    /// A client with the user's own credentials.
    pub async fn connect(&self) -> anyhow::Result<kube::Client> {
        Ok(tether_cluster::connect(self.kubeconfig.as_deref()).await?)
    }

    /// The connection the controller runs with: its own client and the
    /// clients that impersonate Applications' ServiceAccounts, with
    /// `observer` told about every request of each.
    pub async fn connection(
        &self,
        observer: tether_cluster::requests::Observer,
    ) -> anyhow::Result<tether_cluster::Connection> {
        Ok(tether_cluster::connection(self.kubeconfig.as_deref(), Some(observer)).await?)
    }
}
