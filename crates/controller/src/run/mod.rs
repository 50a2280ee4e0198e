//! Running the controller: lead, watch, reconcile, until stopped.

mod apps;
mod lead;
mod watches;
mod windows;

use std::sync::Arc;

use kube::Client;

use crate::break_glass::key;
use crate::context::Config;
use crate::lease;
use crate::metrics::Metrics;
use crate::serve::probe::Probe;
use crate::serve::trigger::Trigger;
use crate::shards::{self, Shards};

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Lease(#[from] lease::LeaseError),
    #[error(transparent)]
    AuditKey(#[from] key::KeyError),
}

/// Runs the controller until the process is stopped: waits to lead (a
/// Lease, so two replicas never both act), then reconciles every
/// Application on change, on changes to its managed objects, when a poll
/// finds its revision moved, and on a periodic resync.
pub async fn run(client: Client, config: Config) -> Result<(), RunError> {
    run_with(client, config, Trigger::default(), Probe::default()).await
}

/// [`run`], with `trigger` wired to wake Applications early (a webhook)
/// and `probe` told whether the Application watch works (`/healthz`).
pub async fn run_with(
    client: Client,
    config: Config,
    trigger: Trigger,
    probe: Probe,
) -> Result<(), RunError> {
    let wiring = Wiring {
        trigger,
        probe,
        ..Wiring::default()
    };
    run_until(client, config, wiring, std::future::pending()).await
}

/// What the controller shares with the HTTP endpoints that serve it.
#[derive(Clone, Default)]
pub struct Wiring {
    /// Wakes Applications early (a push webhook).
    pub trigger: Trigger,
    /// Told whether the Application watch works (`/healthz`, `/readyz`).
    pub probe: Probe,
    /// What the controller measures (`/metrics`): the per-app gauges while
    /// it leads.
    pub metrics: Arc<Metrics>,
    /// How to make clients that impersonate the ServiceAccounts
    /// Applications name; without it such an app is refused, saying so.
    pub connection: Option<tether_cluster::Connection>,
}

/// [`run_with`] until `shutdown` completes (SIGTERM): then the work in
/// flight is dropped (an interrupted sync is converged by the next leader)
/// and the Lease given back, so another replica leads at once rather than
/// when the Lease expires.
pub async fn run_until(
    client: Client,
    config: Config,
    wiring: Wiring,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
    if config.shards > 0 {
        return run_sharded(client, config, wiring, shutdown).await;
    }
    let mut shutdown = std::pin::pin!(shutdown);
    let identity = config.identity.clone();
    let pod = config.pod.clone();
    if let Some(pod) = &pod {
        lease::label_pod(&client, pod, false).await;
    }
    let acquired = tokio::select! {
        hold = lease::acquire(&client, &config, &wiring.probe) => Some(hold?),
        () = &mut shutdown => None,
    };
    let Some(hold) = acquired else {
        return Ok(());
    };
    if let Some(pod) = &pod {
        lease::label_pod(&client, pod, true).await;
    }
    let leading = hold.leading.clone();
    let result = tokio::select! {
        result = lead::lead(client.clone(), config, wiring, Scope::Leader(leading)) => result,
        () = shutdown => {
            tracing::info!(%identity, "stopping: giving the lease back");
            Ok(())
        }
    };
    if let Some(pod) = &pod {
        lease::label_pod(&client, pod, false).await;
    }
    hold.release(&identity).await;
    result
}

/// [`run_until`] with `--shards N`: every replica reconciles, each the apps
/// of the shards it holds (see [`crate::shards`]); on `shutdown` it gives
/// its shards back, so the others take them at once.
async fn run_sharded(
    client: Client,
    config: Config,
    wiring: Wiring,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
    let identity = config.identity.clone();
    let pod = config.pod.clone();
    let (shards, mut keeper) =
        shards::keeper(&client, &config.lease_namespace, &identity, config.shards);
    tracing::info!(%identity, shards = config.shards, "sharded: reconciling the apps of the shards held");
    let reported = shards::report(&client, pod.clone(), shards.clone(), wiring.metrics.clone());
    let result = tokio::select! {
        () = keeper.run() => Ok(()),
        result = lead::lead(client.clone(), config, wiring, Scope::Shards(shards)) => result,
        () = reported => Ok(()),
        () = shutdown => {
            tracing::info!(%identity, "stopping: giving the shards back");
            Ok(())
        }
    };
    keeper.release().await;
    if let Some(pod) = &pod {
        lease::label_pod(&client, pod, false).await;
    }
    result
}

/// Which apps this replica reconciles: all while it leads, or those of
/// the shards it holds.
enum Scope {
    Leader(tokio::sync::watch::Receiver<bool>),
    Shards(Shards),
}

impl Scope {
    fn shards(&self) -> Option<Shards> {
        match self {
            Scope::Leader(_) => None,
            Scope::Shards(shards) => Some(shards.clone()),
        }
    }
}
