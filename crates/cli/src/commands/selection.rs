//! The Applications a read-only command looks at: one by name, or all in a
//! namespace.

use std::path::PathBuf;

use anyhow::Context;
use kube::api::Api;
use tether_controller::api::Application;

#[derive(Debug, clap::Args)]
pub struct Selection {
    /// One Application (default: all in the namespace).
    pub app: Option<String>,
    /// Namespace the Applications live in.
    #[arg(long, short = 'n', default_value = "tether-system")]
    pub namespace: String,
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, env = "TETHER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

impl Selection {
    /// The selected Applications, as the API server has them now.
    pub async fn applications(&self) -> anyhow::Result<Vec<Application>> {
        let client = tether_cluster::connect(self.kubeconfig.as_deref()).await?;
        let api: Api<Application> = Api::namespaced(client, &self.namespace);
        Ok(match &self.app {
            Some(name) => vec![
                api.get(name)
                    .await
                    .with_context(|| format!("Application {}/{name}", self.namespace))?,
            ],
            None => api.list(&Default::default()).await?.items,
        })
    }
}
