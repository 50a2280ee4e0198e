//! One cluster Applications deploy to: its clients, its watch caches, and
//! whether it answers.
//!
//! The cluster Tether runs in is always there. A registered cluster gets a
//! target when the first app names it, with caches of its own, so an
//! outage there touches only its apps: a probe asks it for its version
//! every few seconds (backing off while it is away) and, when it answers
//! again, wakes its apps; meanwhile their reconciles end at once, saying
//! which cluster is away and why, instead of waiting on it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use tether_cluster::Resources;
use tether_cluster::capabilities::CachedCapabilities;
use tether_core::identity::Identity;
use tokio::sync::{mpsc, watch};
use tokio_util::task::AbortOnDropHandle;

use crate::observe::live::{AppKey, LiveCache};

/// How long the probe waits for an answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// How often a reachable cluster is asked.
const PROBE_EVERY: Duration = Duration::from_secs(5);
/// The first wait after a failed probe; it doubles up to [`PROBE_EVERY`]
/// while the cluster stays away (one cheap request every 5 s, so that its
/// apps resume within seconds of its return).
const PROBE_RETRY: Duration = Duration::from_secs(1);

/// Whether a cluster answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    Reachable,
    /// Why not, and since when (RFC 3339).
    Unreachable {
        error: String,
        since: String,
    },
}

/// One destination cluster.
pub struct Target {
    /// The registered name; `None` for the cluster Tether runs in.
    pub name: Option<String>,
    /// Where it is (the API server's URL), for messages.
    pub server: String,
    pub resources: Resources,
    pub live: LiveCache,
    /// Its version and API versions, for Helm's `.Capabilities`.
    pub capabilities: CachedCapabilities,
    /// Makes clients that impersonate Applications' ServiceAccounts there.
    connection: Option<tether_cluster::Connection>,
    reach: watch::Receiver<Reach>,
    /// The Applications deploying here (woken when it answers again).
    users: Arc<Mutex<HashSet<AppKey>>>,
    /// What the target was built from (the Secret's resourceVersion).
    pub(super) source: String,
    _probe: Option<AbortOnDropHandle<()>>,
}

impl Target {
    /// The cluster Tether runs in: always reachable as far as this target
    /// knows (its own outage is the controller's, and handled as such).
    pub fn local(
        client: Client,
        live: LiveCache,
        connection: Option<tether_cluster::Connection>,
    ) -> Target {
        Target {
            name: None,
            server: client_url(&connection),
            resources: Resources::new(client.clone()),
            capabilities: CachedCapabilities::new(client, tether_cluster::capabilities::MAX_AGE),
            live,
            connection,
            reach: watch::channel(Reach::Reachable).1,
            users: Arc::default(),
            source: String::new(),
            _probe: None,
        }
    }

    /// A registered cluster reached through `connection`, probed at once
    /// (so the first reconcile knows whether it answers) and then in the
    /// background. Its apps are woken through `wake`.
    pub async fn remote(
        name: &str,
        connection: tether_cluster::Connection,
        source: String,
        wake: mpsc::UnboundedSender<AppKey>,
    ) -> Result<Target, tether_cluster::ClusterError> {
        let client = connection.client()?;
        let server = client_url(&Some(connection.clone()));
        let users: Arc<Mutex<HashSet<AppKey>>> = Arc::default();
        let first = probe(&client).await;
        let (reach_tx, reach) = watch::channel(first);
        let probe_task = tokio::spawn(keep_probing(
            client.clone(),
            server.clone(),
            reach_tx,
            users.clone(),
            wake.clone(),
        ));
        Ok(Target {
            name: Some(name.to_string()),
            server,
            resources: Resources::new(client.clone()),
            capabilities: CachedCapabilities::new(
                client.clone(),
                tether_cluster::capabilities::MAX_AGE,
            ),
            live: LiveCache::new(client, wake),
            connection: Some(connection),
            reach,
            users,
            source,
            _probe: Some(AbortOnDropHandle::new(probe_task)),
        })
    }

    /// A cluster an app names that cannot be reached at all (not
    /// registered, or its Secret is unusable): every reconcile of its apps
    /// ends at once with `why`. Its client points at a closed loopback
    /// port, so nothing it could be asked to do would leave this machine,
    /// let alone reach another cluster.
    pub fn unavailable(name: &str, why: String) -> Target {
        let config = kube::Config::new("https://127.0.0.1:1".parse().expect("a URL"));
        let client = Client::try_from(config).expect("a client for a fixed URL");
        let (tx, reach) = watch::channel(Reach::Unreachable {
            error: why,
            since: String::new(),
        });
        drop(tx);
        Target {
            name: Some(name.to_string()),
            server: String::new(),
            resources: Resources::new(client.clone()),
            capabilities: CachedCapabilities::new(
                client.clone(),
                tether_cluster::capabilities::MAX_AGE,
            ),
            live: LiveCache::new(client, mpsc::unbounded_channel().0),
            connection: None,
            reach,
            users: Arc::default(),
            source: String::new(),
            _probe: None,
        }
    }

    /// The client with the controller's own identity there.
    pub fn client(&self) -> &Client {
        self.resources.client()
    }

    /// `Ok` while the cluster answers; else why not, naming the cluster.
    pub fn reachable(&self) -> Result<(), Unreachable> {
        match &*self.reach.borrow() {
            Reach::Reachable => Ok(()),
            Reach::Unreachable { error, since } => Err(Unreachable {
                cluster: self.describe(),
                error: error.clone(),
                since: since.clone(),
            }),
        }
    }

    /// "cluster NAME (URL)", or "this cluster".
    pub fn describe(&self) -> String {
        match (&self.name, self.server.is_empty()) {
            (None, _) => "this cluster".to_string(),
            (Some(name), true) => format!("cluster {name}"),
            (Some(name), false) => format!("cluster {name} ({})", self.server),
        }
    }

    /// The served kinds there, reached as `identity`: the controller's own
    /// client, or one impersonating an Application's ServiceAccount.
    pub fn resources_as(&self, identity: &Identity) -> Result<Resources, String> {
        let Some(user) = identity.user() else {
            return Ok(self.resources.clone());
        };
        let connection = self.connection.as_ref().ok_or_else(|| {
            format!(
                "{identity}: this controller was started without a connection it can impersonate with"
            )
        })?;
        let client = connection
            .client_as(&user)
            .map_err(|error| format!("{identity}: {error}"))?;
        Ok(self.resources.with_client(client))
    }

    /// Counts `app` among this cluster's apps.
    pub(super) fn join(&self, app: &AppKey) {
        self.users.lock().expect("lock").insert(app.clone());
    }

    /// No longer counts `app`; whether any app is left.
    pub(super) fn leave(&self, app: &AppKey) -> bool {
        let mut users = self.users.lock().expect("lock");
        users.remove(app);
        !users.is_empty()
    }

    /// How many apps deploy here.
    pub fn apps(&self) -> usize {
        self.users.lock().expect("lock").len()
    }
}

/// Why a cluster cannot be used right now.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{cluster} is unreachable{}: {error}; its apps keep their last known state until it answers", since_text(.since))]
pub struct Unreachable {
    pub cluster: String,
    pub error: String,
    pub since: String,
}

fn since_text(since: &str) -> String {
    match since {
        "" => String::new(),
        since => format!(" since {since}"),
    }
}

fn client_url(connection: &Option<tether_cluster::Connection>) -> String {
    connection
        .as_ref()
        .map(tether_cluster::Connection::server)
        .unwrap_or_default()
}

/// Asks the cluster for its version.
async fn probe(client: &Client) -> Reach {
    let error = match tokio::time::timeout(PROBE_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(_)) => return Reach::Reachable,
        Ok(Err(error)) => tether_cluster::error::describe(&error),
        Err(_) => format!("no answer within {} s", PROBE_TIMEOUT.as_secs()),
    };
    Reach::Unreachable {
        error,
        since: k8s_openapi::jiff::Timestamp::now().to_string(),
    }
}

/// Probes until dropped; when the cluster answers again, wakes its apps.
async fn keep_probing(
    client: Client,
    server: String,
    reach: watch::Sender<Reach>,
    users: Arc<Mutex<HashSet<AppKey>>>,
    wake: mpsc::UnboundedSender<AppKey>,
) {
    let mut retry = PROBE_RETRY;
    loop {
        let wait = match &*reach.borrow() {
            Reach::Reachable => PROBE_EVERY,
            Reach::Unreachable { .. } => retry,
        };
        tokio::time::sleep(wait).await;
        let now = probe(&client).await;
        let was = reach.borrow().clone();
        match (&was, &now) {
            (Reach::Unreachable { .. }, Reach::Reachable) => {
                tracing::info!(%server, "the cluster answers again; waking its apps");
                reach.send_replace(now);
                retry = PROBE_RETRY;
                let users: Vec<AppKey> = users.lock().expect("lock").iter().cloned().collect();
                for app in users {
                    let _ = wake.send(app);
                }
            }
            (Reach::Reachable, Reach::Unreachable { error, .. }) => {
                tracing::warn!(%server, %error, "the cluster does not answer; its apps wait");
                reach.send_replace(now);
                let users: Vec<AppKey> = users.lock().expect("lock").iter().cloned().collect();
                for app in users {
                    let _ = wake.send(app);
                }
            }
            (Reach::Unreachable { since, .. }, Reach::Unreachable { error, .. }) => {
                // Keep when it went away; say the latest reason.
                let next = Reach::Unreachable {
                    error: error.clone(),
                    since: since.clone(),
                };
                if was != next {
                    reach.send_replace(next);
                }
                retry = (retry * 2).min(PROBE_EVERY);
            }
            (Reach::Reachable, Reach::Reachable) => {}
        }
    }
}
