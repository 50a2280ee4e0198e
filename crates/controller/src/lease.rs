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
const LEASE_SECONDS: u64 = 15;
/// Seconds before expiry that the holder renews it.
const LEASE_GRACE_SECONDS: u64 = 5;
/// How long a stopping controller waits to give its Lease back.
const RELEASE_WAIT: Duration = Duration::from_secs(3);

/// What a sync checks before each wave: that this replica still holds the
/// Lease, as the API server has it, not only as its own lease task last
/// saw it. A replica paused past the Lease's expiry (a stopped process, a
/// partition) resumes believing it leads until its next renewal fails;
/// meanwhile another replica has taken the Lease and syncs the same apps.
/// Fencing each wave keeps the two from ever applying at once.
#[derive(Clone)]
pub struct Fence {
    leases: Api<Lease>,
    identity: String,
    leading: watch::Receiver<bool>,
}

/// Why this replica may not write any more.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Lease {namespace}/{LEASE_NAME}: {reason}; this replica ({identity}) stopped writing so that only the leader writes"
)]
pub struct Fenced {
    pub namespace: String,
    pub identity: String,
    pub reason: String,
}

impl Fence {
    /// The fence of replica `identity`, which leads while `leading` says so.
    pub fn new(
        client: &Client,
        namespace: &str,
        identity: &str,
        leading: watch::Receiver<bool>,
    ) -> Fence {
        Fence {
            leases: Api::namespaced(client.clone(), namespace),
            identity: identity.into(),
            leading,
        }
    }

    /// Ok while this replica holds the Lease: its lease task says so, and
    /// the API server's Lease names it and has not expired.
    pub async fn check(&self) -> Result<(), Fenced> {
        let fenced = |reason: String| Fenced {
            namespace: self.leases.namespace().unwrap_or_default().to_string(),
            identity: self.identity.clone(),
            reason,
        };
        if !*self.leading.borrow() {
            return Err(fenced("no longer held".into()));
        }
        let lease = self
            .leases
            .get(LEASE_NAME)
            .await
            .map_err(|error| fenced(format!("cannot be read ({error})")))?;
        held(&lease, &self.identity, k8s_openapi::jiff::Timestamp::now()).map_err(fenced)
    }
}

/// Whether `lease` is held by `identity` at `now`: it names it and its
/// last renewal plus its duration is still ahead. The reason otherwise.
pub fn held(
    lease: &Lease,
    identity: &str,
    now: k8s_openapi::jiff::Timestamp,
) -> Result<(), String> {
    let spec = lease.spec.clone().unwrap_or_default();
    match spec.holder_identity.as_deref() {
        Some(holder) if holder == identity => {}
        Some(holder) if !holder.is_empty() => return Err(format!("held by {holder}")),
        _ => return Err("held by no one".into()),
    }
    let (Some(renewed), Some(seconds)) = (spec.renew_time, spec.lease_duration_seconds) else {
        return Err("has no renewal time or duration".into());
    };
    let expires = renewed.0 + k8s_openapi::jiff::SignedDuration::from_secs(seconds.into());
    if expires <= now {
        return Err(format!("expired at {expires}"));
    }
    Ok(())
}

/// Why leading failed or stopped.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("leader election on Lease {namespace}/{LEASE_NAME}: {message}")]
    Manager { namespace: String, message: String },
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
        let mut hold = watch_lease(client, config).await?;
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

async fn watch_lease(client: &Client, config: &Config) -> Result<Hold, LeaseError> {
    let lease = LeaseManagerBuilder::new(client.clone(), LEASE_NAME)
        .with_namespace(&config.lease_namespace)
        .with_identity(&config.identity)
        .with_duration(LEASE_SECONDS)
        .with_grace(LEASE_GRACE_SECONDS)
        .build()
        .await
        .map_err(|error| LeaseError::Manager {
            namespace: config.lease_namespace.clone(),
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
    let mut events = std::pin::pin!(watcher(leases, config).default_backoff().applied_objects());
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};

    use super::*;

    fn lease(holder: &str, renewed: Timestamp) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(renewed)),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn a_lease_renewed_by_this_replica_within_its_duration_is_held() {
        let now = Timestamp::now();
        let renewed = now - SignedDuration::from_secs(10);
        assert_eq!(held(&lease("a", renewed), "a", now), Ok(()));
    }

    #[test]
    fn a_lease_another_replica_took_is_not_held() {
        let now = Timestamp::now();
        assert_eq!(held(&lease("b", now), "a", now), Err("held by b".into()));
        assert_eq!(
            held(&lease("", now), "a", now),
            Err("held by no one".into())
        );
    }

    #[test]
    fn a_lease_past_its_duration_is_not_held_even_by_its_holder() {
        let now = Timestamp::now();
        let renewed = now - SignedDuration::from_secs(16);
        let reason = held(&lease("a", renewed), "a", now).unwrap_err();
        assert!(reason.starts_with("expired at "), "{reason}");
    }
}
