//! The Applications a command looks at: one by name, or all in a
//! namespace.

use anyhow::Context;
use kube::ResourceExt;
use kube::api::Api;
use tether_controller::api::{Application, StoredApplication};

use super::kubeconfig::Kubeconfig;

#[derive(Debug, clap::Args)]
pub struct Selection {
    /// One Application (default: all in the namespace).
    pub app: Option<String>,
    /// Namespace the Applications live in.
    #[arg(long, short = 'n', default_value = "tether-system")]
    pub namespace: String,
    #[command(flatten)]
    pub kubeconfig: Kubeconfig,
}

/// The Application `namespace/name`, as the API server has it now; an error
/// names it.
pub async fn application(
    client: kube::Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Application> {
    Api::<Application>::namespaced(client, namespace)
        .get(name)
        .await
        .with_context(|| format!("Application {namespace}/{name}"))
}

impl Selection {
    /// The selected Applications, as the API server has them now. One that
    /// is not a valid Application is named on stderr with the field at
    /// fault and left out, so it cannot hide the others.
    pub async fn applications(&self) -> anyhow::Result<Vec<Application>> {
        let client = self.kubeconfig.connect().await?;
        let api: Api<StoredApplication> = Api::namespaced(client, &self.namespace);
        let namespace = &self.namespace;
        Ok(match &self.app {
            Some(name) => {
                let stored = api
                    .get(name)
                    .await
                    .with_context(|| format!("Application {namespace}/{name}"))?;
                let app = stored
                    .decoded
                    .with_context(|| format!("Application {namespace}/{name} is not valid"))?;
                vec![(*app).clone()]
            }
            None => api
                .list(&Default::default())
                .await
                .with_context(|| format!("Applications in namespace {namespace}"))?
                .items
                .into_iter()
                .filter_map(|stored| match &stored.decoded {
                    Ok(app) => Some((**app).clone()),
                    Err(invalid) => {
                        let name = stored.name_any();
                        eprintln!(
                            "warning: Application {namespace}/{name} is not valid: {invalid}"
                        );
                        None
                    }
                })
                .collect(),
        })
    }
}
