//! Building a client from a kubeconfig.

use std::path::Path;

use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::ClusterError;
use crate::requests::{ObserveLayer, Observer};

/// A client for the cluster in `kubeconfig`, or — when `None` — the usual
/// places (`$KUBECONFIG`, `~/.kube/config`, in-cluster service account).
pub async fn connect(kubeconfig: Option<&Path>) -> Result<Client, ClusterError> {
    Client::try_from(config(kubeconfig).await?).map_err(ClusterError::Connect)
}

/// [`connect`], with `observer` told about every request the client makes
/// (see [`crate::requests`]).
pub async fn connect_observed(
    kubeconfig: Option<&Path>,
    observer: Observer,
) -> Result<Client, ClusterError> {
    let builder =
        ClientBuilder::try_from(config(kubeconfig).await?).map_err(ClusterError::Connect)?;
    Ok(builder.with_layer(&ObserveLayer(observer)).build())
}

async fn config(kubeconfig: Option<&Path>) -> Result<Config, ClusterError> {
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
    Ok(config)
}
