//! Leader election on the controller's Lease: wait to lead, and give the
//! Lease back when stopping. A follower also watches the Lease, so when a
//! stopping leader gives it back the follower leads at once instead of
//! when the Lease would have expired.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

use crate::context::{Config, ReplicaPod};
use crate::serve::probe::Probe;
use crate::watch_retry::Retrying;

/// The label on the leading replica's pod (`"true"`): the Service routes
/// webhooks to the leader only, the one replica that acts on them.
pub const LEADER_LABEL: &str = "tether.dev/leader";

/// Labels `pod` as leading, or removes the label (a restarted container
/// first clears what its previous run left). A failure is logged, never
/// fatal: only webhooks depend on it, and polling catches up.
pub async fn label_pod(client: &Client, pod: &ReplicaPod, leading: bool) {
    use k8s_openapi::api::core::v1::Pod as KubePod;
    use kube::api::{Patch, PatchParams};
    let value = if leading {
        serde_json::json!("true")
    } else {
        serde_json::Value::Null
    };
    let patch = serde_json::json!({"metadata": {"labels": {LEADER_LABEL: value}}});
    let pods: Api<KubePod> = Api::namespaced(client.clone(), &pod.namespace);
    if let Err(error) = pods
        .patch(&pod.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        tracing::warn!(pod = %format!("{}/{}", pod.namespace, pod.name), leading, %error,
            "cannot label this replica's pod; webhooks may reach a standby until it can");
    }
}

/// The Lease the replicas share.
pub const LEASE_NAME: &str = "tether-controller";
/// Seconds the Lease stays valid after a renewal.
pub(crate) const LEASE_SECONDS: u64 = 15;
/// Seconds before expiry that the holder renews it.
const LEASE_GRACE_SECONDS: u64 = 5;
/// How long a stopping controller waits to give its Lease back.
const RELEASE_WAIT: Duration = Duration::from_secs(3);

/// Why leading failed or stopped.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("leader election on Lease {namespace}/{lease}: {message}")]
    Manager {
        namespace: String,
        lease: String,
        message: String,
    },
    #[error("lost the leader lease to another replica; stopping so only one acts")]
    Lost,
}

/// This replica's hold on the Lease: `leading` says whether it still
/// holds it; dropping the hold gives it back (see [`Hold::release`]).
pub struct Hold {
    pub leading: watch::Receiver<bool>,
    task: AbortOnDropHandle<Result<LeaseManager, LeaseManagerError>>,
}

impl Hold {
    /// Gives the Lease back: closing the channel makes the lease task
    /// release it and end; waits for that a short while.
    pub async fn release(self, identity: &str) {
        let Hold { leading, mut task } = self;
        drop(leading);
        match tokio::time::timeout(RELEASE_WAIT, &mut task).await {
            Ok(Ok(Ok(_))) => tracing::info!(%identity, "lease given back"),
            Ok(Ok(Err(error))) => tracing::warn!(%identity, %error, "giving the lease back failed"),
            Ok(Err(error)) => tracing::warn!(%identity, %error, "the lease task failed"),
            Err(_) => tracing::warn!(%identity, "giving the lease back took too long"),
        }
    }
}

/// Waits until this replica holds the Lease.
/// Until then `probe` says this replica is a standby.
pub async fn acquire(client: &Client, config: &Config, probe: &Probe) -> Result<Hold, LeaseError> {
    loop {
        let mut hold = hold(
            client,
            &config.lease_namespace,
            LEASE_NAME,
            &config.identity,
        )
        .await?;
        if *hold.leading.borrow_and_update() {
            probe.standby(false);
            return Ok(hold);
        }
        probe.standby(true);
        tracing::info!(identity = %config.identity, "waiting to lead");
        tokio::select! {
            led = became_leader(&mut hold.leading) => {
                probe.standby(false);
                return led.map(|()| hold);
            }
            () = given_back(client, &config.lease_namespace) => {
                // The holder stopped: start over, so the new lease
                // manager takes the free Lease now.
                hold.release(&config.identity).await;
            }
        }
    }
}

/// Starts trying to hold Lease `namespace/name` as `identity` (created if
/// missing), renewing it while held; the shard Leases use it too.
pub(crate) async fn hold(
    client: &Client,
    namespace: &str,
    name: &str,
    identity: &str,
) -> Result<Hold, LeaseError> {
    let lease = LeaseManagerBuilder::new(client.clone(), name)
        .with_namespace(namespace)
        .with_identity(identity)
        .with_duration(LEASE_SECONDS)
        .with_grace(LEASE_GRACE_SECONDS)
        .build()
        .await
        .map_err(|error| LeaseError::Manager {
            namespace: namespace.to_string(),
            lease: name.to_string(),
            message: error.to_string(),
        })?;
    let (leading, task) = lease.watch().await;
    Ok(Hold {
        leading,
        task: AbortOnDropHandle::new(task),
    })
}

async fn became_leader(leading: &mut watch::Receiver<bool>) -> Result<(), LeaseError> {
    loop {
        if leading.changed().await.is_err() {
            return Err(LeaseError::Lost);
        }
        if *leading.borrow_and_update() {
            return Ok(());
        }
    }
}

/// Completes when the Lease, seen held, is given back (no holder).
async fn given_back(client: &Client, namespace: &str) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={LEASE_NAME}"));
    let mut seen_held = false;
    let mut events = std::pin::pin!(watcher(leases, config).retrying().applied_objects());
    while let Some(event) = events.next().await {
        let Ok(lease) = event else { continue };
        let holder = lease
            .spec
            .and_then(|spec| spec.holder_identity)
            .filter(|holder| !holder.is_empty());
        match holder {
            Some(_) => seen_held = true,
            None if seen_held => return,
            None => {}
        }
    }
    std::future::pending().await
}
