//! Building a client from a kubeconfig.

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::ClusterError;

/// A client for the cluster in `kubeconfig`, or — when `None` — the usual
/// places (`$KUBECONFIG`, `~/.kube/config`, in-cluster service account).
pub async fn connect(kubeconfig: Option<&Path>) -> Result<Client, ClusterError> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig_error = |cause| ClusterError::Kubeconfig {
                path: path.display().to_string(),
                cause,
            };
            let file = Kubeconfig::read_from(path).map_err(kubeconfig_error)?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(kubeconfig_error)?
        }
        None => Config::infer()
            .await
            .map_err(|error| ClusterError::Connect(kube::Error::InferConfig(error)))?,
    };
    Client::try_from(config).map_err(ClusterError::Connect)
}
