//! The clusters Applications deploy to: the one Tether runs in, and those
//! registered as Secrets labelled `tether.dev/cluster: "true"` in the
//! controller's namespace (see [`tether_cluster::remote`]).
//!
//! A registered cluster's [`Target`] — clients, watch caches, probe — is
//! made when the first app names it, made again when its Secret changes,
//! and dropped when the last app leaves it.

pub mod registration;
pub mod target;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::reflector::Store;
use tether_cluster::remote::{self, CLUSTER_LABEL};
use tokio::sync::mpsc;

use crate::observe::live::AppKey;
use crate::ready::Ready;
pub use target::{Target, Unreachable};

/// How long a reconcile waits for the cluster Secrets' first list.
const SECRETS_WAIT: Duration = Duration::from_secs(30);

/// Every destination cluster in use.
pub struct Clusters {
    local: Arc<Target>,
    /// Where cluster Secrets live (the controller's namespace).
    namespace: String,
    secrets: Store<Secret>,
    secrets_ready: Ready,
    remote: tokio::sync::Mutex<HashMap<String, Arc<Target>>>,
    /// Which cluster each app was last seen deploying to (`None`: local).
    placed: Mutex<HashMap<AppKey, Option<String>>>,
    wake: mpsc::UnboundedSender<AppKey>,
}

impl Clusters {
    /// The cluster Tether runs in, and the registered ones in `secrets`
    /// (watched in `namespace`, labelled [`CLUSTER_LABEL`]).
    pub fn new(
        local: Target,
        namespace: &str,
        (secrets, secrets_ready): (Store<Secret>, Ready),
        wake: mpsc::UnboundedSender<AppKey>,
    ) -> Clusters {
        Clusters {
            local: Arc::new(local),
            namespace: namespace.to_string(),
            secrets,
            secrets_ready,
            remote: tokio::sync::Mutex::default(),
            placed: Mutex::default(),
            wake,
        }
    }

    /// Only the cluster Tether runs in (an app naming another is told it
    /// is not registered).
    pub fn local_only(local: Target, namespace: &str) -> Clusters {
        Clusters::new(
            local,
            namespace,
            (kube::runtime::reflector::store().0, Ready::never()),
            mpsc::unbounded_channel().0,
        )
    }

    /// The registered cluster Secrets, as last listed.
    pub fn secrets(&self) -> Vec<Arc<Secret>> {
        self.secrets.state()
    }

    /// The cluster Tether runs in.
    pub fn local(&self) -> &Arc<Target> {
        &self.local
    }

    /// The cluster `app` deploys to (`name`, or the local one), counting
    /// `app` among its users. A registered cluster is made ready on first
    /// use; one that is not registered, or whose Secret is unusable, is a
    /// target that is never reachable, saying why.
    pub async fn target(&self, name: Option<&str>, app: &AppKey) -> Arc<Target> {
        let target = match name {
            None => self.local.clone(),
            Some(name) => self.remote(name).await,
        };
        self.place(app, name, &target).await;
        target
    }

    /// `app` no longer deploys anywhere (it is gone).
    pub async fn forget(&self, app: &AppKey) {
        let before = self.placed.lock().expect("lock").remove(app);
        if let Some(Some(name)) = before {
            self.leave(&name, app).await;
        }
        self.local.leave(app);
    }

    /// Forgets every app for which `exists` is false.
    pub async fn sweep(&self, exists: impl Fn(&AppKey) -> bool) {
        let gone: Vec<AppKey> = self
            .placed
            .lock()
            .expect("lock")
            .keys()
            .filter(|app| !exists(app))
            .cloned()
            .collect();
        for app in gone {
            self.forget(&app).await;
        }
    }

    /// The registered clusters in use, by name.
    pub async fn in_use(&self) -> Vec<Arc<Target>> {
        self.remote.lock().await.values().cloned().collect()
    }

    async fn place(&self, app: &AppKey, name: Option<&str>, target: &Target) {
        target.join(app);
        let before = self
            .placed
            .lock()
            .expect("lock")
            .insert(app.clone(), name.map(str::to_string));
        match before {
            Some(before) if before.as_deref() == name => {}
            Some(Some(before)) => self.leave(&before, app).await,
            Some(None) => {
                self.local.leave(app);
            }
            None => {}
        }
    }

    /// `app` left cluster `name`; the last one out drops its target.
    async fn leave(&self, name: &str, app: &AppKey) {
        let mut remote = self.remote.lock().await;
        if let Some(target) = remote.get(name)
            && !target.leave(app)
        {
            tracing::info!(cluster = %name, "no app deploys to the cluster any more; dropping its caches");
            remote.remove(name);
        }
    }

    async fn remote(&self, name: &str) -> Arc<Target> {
        let secret = match self.secret_of(name).await {
            Ok(secret) => secret,
            Err(why) => return Arc::new(Target::unavailable(name, why)),
        };
        let version = secret.metadata.resource_version.clone().unwrap_or_default();
        let mut remote = self.remote.lock().await;
        if let Some(target) = remote.get(name)
            && target.source == version
        {
            return target.clone();
        }
        let secret_name = format!(
            "{}/{}",
            self.namespace,
            secret.metadata.name.as_deref().unwrap_or_default()
        );
        let data = remote::secret_data(&secret);
        let config = match remote::config_of(&secret_name, &data).await {
            Ok(config) => config,
            Err(error) => return Arc::new(Target::unavailable(name, error.to_string())),
        };
        let connection = tether_cluster::Connection::new(config, None);
        let target = match Target::remote(name, connection, version, self.wake.clone()).await {
            Ok(target) => Arc::new(target),
            Err(error) => {
                return Arc::new(Target::unavailable(
                    name,
                    format!("cluster Secret {secret_name}: {error}"),
                ));
            }
        };
        // Apps that used the old target (a changed Secret) use this one.
        if let Some(old) = remote.insert(name.to_string(), target.clone()) {
            for (app, placed) in self.placed.lock().expect("lock").iter() {
                if placed.as_deref() == Some(name) {
                    target.join(app);
                }
            }
            drop(old);
        }
        tracing::info!(cluster = %name, server = %target.server, "deploying to a registered cluster");
        target
    }

    /// The Secret that registers `name`, or why there is none.
    async fn secret_of(&self, name: &str) -> Result<Secret, String> {
        let listed = tokio::time::timeout(SECRETS_WAIT, self.secrets_ready.wait()).await;
        if !matches!(listed, Ok(true)) {
            return Err(format!(
                "cluster {name}: the cluster Secrets in namespace {} could not be listed within {} s",
                self.namespace,
                SECRETS_WAIT.as_secs()
            ));
        }
        let mut matching: Vec<Secret> = self
            .secrets
            .state()
            .into_iter()
            .filter(|secret| remote::registered_name(secret) == name)
            .map(|secret| (*secret).clone())
            .collect();
        match matching.len() {
            1 => Ok(matching.remove(0)),
            0 => Err(format!(
                "cluster {name} is not registered: no Secret labelled {CLUSTER_LABEL}=true in namespace {} names it (tether cluster add {name} --kubeconfig FILE)",
                self.namespace
            )),
            _ => Err(format!(
                "cluster {name}: {} Secrets labelled {CLUSTER_LABEL}=true in namespace {} name it; keep one",
                matching.len(),
                self.namespace
            )),
        }
    }
}
