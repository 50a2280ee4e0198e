//! Building a client from a kubeconfig, and clients that act as someone
//! else (Kubernetes impersonation) for the Applications that name a
//! ServiceAccount.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use std::time::Duration;

use kube::client::ClientBuilder;
use kube::client::retry::RetryPolicy;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tower::buffer::BufferLayer;
use tower::retry::RetryLayer;

use crate::ClusterError;
use crate::requests::{ObserveLayer, Observer};

/// A client for the cluster in `kubeconfig`, or — when `None` — the usual
/// places (`$KUBECONFIG`, `~/.kube/config`, in-cluster service account).
pub async fn connect(kubeconfig: Option<&Path>) -> Result<Client, ClusterError> {
    Connection::new(config(kubeconfig).await?, None).client()
}

/// [`connect`], with `observer` told about every request the client makes
/// (see [`crate::requests`]).
pub async fn connect_observed(
    kubeconfig: Option<&Path>,
    observer: Observer,
) -> Result<Client, ClusterError> {
    Connection::new(config(kubeconfig).await?, Some(observer)).client()
}

/// [`connect_observed`], keeping what it takes to make clients that
/// impersonate (see [`Connection::client_as`]).
pub async fn connection(
    kubeconfig: Option<&Path>,
    observer: Option<Observer>,
) -> Result<Connection, ClusterError> {
    Ok(Connection::new(config(kubeconfig).await?, observer))
}

/// How to reach the API server: the controller's own client, and one
/// client per impersonated user, made once and reused (each keeps its
/// connections), every one of them observed.
#[derive(Clone)]
pub struct Connection {
    config: Config,
    observer: Option<Observer>,
    impersonating: Arc<Mutex<HashMap<String, Client>>>,
}

impl Connection {
    pub fn new(config: Config, observer: Option<Observer>) -> Connection {
        Connection {
            config,
            observer,
            impersonating: Arc::default(),
        }
    }

    /// The API server's URL.
    pub fn server(&self) -> String {
        self.config.cluster_url.to_string()
    }

    /// A client with the connection's own identity.
    pub fn client(&self) -> Result<Client, ClusterError> {
        self.build(self.config.clone())
    }

    /// A client whose every request is made as `user` (the
    /// `Impersonate-User` header; the API server adds a ServiceAccount's
    /// groups itself), so RBAC judges `user`'s rights, not ours.
    pub fn client_as(&self, user: &str) -> Result<Client, ClusterError> {
        let mut clients = self.impersonating.lock().expect("lock");
        if let Some(client) = clients.get(user) {
            return Ok(client.clone());
        }
        let mut config = self.config.clone();
        config.auth_info.impersonate = Some(user.to_string());
        config.auth_info.impersonate_groups = None;
        let client = self.build(config)?;
        clients.insert(user.to_string(), client.clone());
        Ok(client)
    }

    /// A client that carries `token` and no other credential of ours (no
    /// client certificate, token file, exec plugin or impersonation): each
    /// request is the token's owner's own, as if they made it.
    pub fn client_with_token(&self, token: &str) -> Result<Client, ClusterError> {
        self.build(token_only(&self.config, token))
    }

    fn build(&self, mut config: Config) -> Result<Client, ClusterError> {
        config.default_retry = false;
        let builder = ClientBuilder::try_from(config)
            .map_err(ClusterError::Connect)?
            // A retry needs a service it can clone; kube's stack is boxed.
            .with_layer(&BufferLayer::new(RETRY_BUFFER))
            .with_layer(&RetryLayer::new(retry_policy()));
        Ok(match &self.observer {
            Some(observer) => builder.with_layer(&ObserveLayer(observer.clone())).build(),
            None => builder.build(),
        })
    }
}

/// How the controller's requests are retried when the API server answers
/// 429, 503 or 504: kube's own policy, honouring `Retry-After`, but with
/// the wait between tries capped at 5 s. kube's default grows to 1000 s,
/// so after an overload the controller sat out its own back-off long after
/// the server was fine (the fault suite: a commit made during a 20 s storm
/// of 503s synced up to 25 s after the storm). After 10 tries the error
/// reaches the reconcile, which reports it and tries again with back-off.
fn retry_policy() -> RetryPolicy {
    RetryPolicy::new(Duration::from_millis(50), Duration::from_secs(5), 10, true)
        .expect("valid retry parameters")
}

/// Requests queued for the retrying service at most (a slot is freed as
/// soon as the request is handed on, so this is far above use).
const RETRY_BUFFER: usize = 1024;

/// `config` with its credentials replaced by `token` alone.
fn token_only(config: &Config, token: &str) -> Config {
    let mut config = config.clone();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.to_string().into()),
        ..Default::default()
    };
    config
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("cluster", &self.config.cluster_url.to_string())
            .finish_non_exhaustive()
    }
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

#[cfg(test)]
mod token_tests {
    use super::*;

    #[test]
    fn a_token_client_carries_the_token_and_none_of_the_controllers_credentials() {
        let mut config = Config::new("https://127.0.0.1:6443".parse().unwrap());
        config.auth_info.token_file =
            Some("/var/run/secrets/kubernetes.io/serviceaccount/token".into());
        config.auth_info.client_certificate_data = Some("cert".into());
        config.auth_info.client_key_data = Some("key".to_string().into());
        config.auth_info.impersonate = Some("system:serviceaccount:x:y".into());
        let theirs = token_only(&config, "their-token");
        // Every credential field, as a kubeconfig would write it: the token alone.
        let written = serde_json::to_value(&theirs.auth_info).unwrap();
        assert_eq!(written, serde_json::json!({"token": "their-token"}));
        assert_eq!(theirs.cluster_url, config.cluster_url);
    }
}
