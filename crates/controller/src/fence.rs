//! Fencing: before it writes, a sync checks that this replica still holds
//! the controller's Lease — or, when sharded, the Lease of the app's shard
//! — as the API server has it (see [`Fence`]). Leading itself (acquiring
//! and renewing the Lease) is `crate::lease`; holding shards is
//! `crate::shards`.

use std::collections::BTreeSet;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use tether_core::shard::{self, Shard};
use tokio::sync::watch;

/// What a sync checks before each wave: that this replica still holds the
/// Lease, as the API server has it, not only as its own lease task last
/// saw it. A replica paused past the Lease's expiry (a stopped process, a
/// partition) resumes believing it leads until its next renewal fails;
/// meanwhile another replica has taken the Lease and syncs the same apps.
/// Fencing each wave keeps the two from ever applying at once.
#[derive(Clone)]
pub struct Fence {
    leases: Api<Lease>,
    lease: String,
    identity: String,
    holding: Holding,
}

/// What this replica's own lease tasks say it holds.
#[derive(Clone)]
enum Holding {
    /// The leader Lease, while this says so.
    Leader(watch::Receiver<bool>),
    /// The shards in `held` (of `count`); `shard` is the app's, once the
    /// fence is narrowed to one app ([`Fence::for_app`]).
    Shards {
        held: watch::Receiver<BTreeSet<Shard>>,
        count: u32,
        shard: Option<Shard>,
    },
}

impl Holding {
    fn holds(&self) -> bool {
        match self {
            Holding::Leader(leading) => *leading.borrow(),
            Holding::Shards { held, shard, .. } => {
                shard.is_some_and(|s| held.borrow().contains(&s))
            }
        }
    }
}

/// Why this replica may not write any more.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Lease {namespace}/{lease}: {reason}; this replica ({identity}) stopped writing so that only the leader writes"
)]
pub struct Fenced {
    pub namespace: String,
    pub lease: String,
    pub identity: String,
    pub reason: String,
}

impl Fence {
    /// The fence of replica `identity` on Lease `namespace/lease`, which
    /// it leads while `leading` says so.
    pub fn new(
        client: &Client,
        (namespace, lease): (&str, &str),
        identity: &str,
        leading: watch::Receiver<bool>,
    ) -> Fence {
        Fence {
            leases: Api::namespaced(client.clone(), namespace),
            lease: lease.into(),
            identity: identity.into(),
            holding: Holding::Leader(leading),
        }
    }

    /// The fence of replica `identity` over `count` shards, whose Leases
    /// are in `namespace` and which holds the shards `held` says; narrow
    /// it to an app with [`Fence::for_app`] (until then it never passes).
    pub fn sharded(
        client: &Client,
        namespace: &str,
        identity: &str,
        (count, held): (u32, watch::Receiver<BTreeSet<Shard>>),
    ) -> Fence {
        Fence {
            leases: Api::namespaced(client.clone(), namespace),
            lease: String::new(),
            identity: identity.into(),
            holding: Holding::Shards {
                held,
                count,
                shard: None,
            },
        }
    }

    /// The fence for writes of the app `namespace/name`: the leader's
    /// fence itself, or the fence of the app's shard Lease.
    pub fn for_app(&self, (namespace, name): &(String, String)) -> Fence {
        let mut fence = self.clone();
        if let Holding::Shards { count, shard, .. } = &mut fence.holding {
            let of_app = shard::shard_of(namespace, name, *count);
            *shard = Some(of_app);
            fence.lease = shard::lease_name(of_app);
        }
        fence
    }

    /// Ok while this replica holds the Lease: its lease task says so, and
    /// the API server's Lease names it and has not expired.
    pub async fn check(&self) -> Result<(), Fenced> {
        let fenced = |reason: String| Fenced {
            namespace: self.leases.namespace().unwrap_or_default().to_string(),
            lease: self.lease.clone(),
            identity: self.identity.clone(),
            reason,
        };
        if !self.holding.holds() {
            return Err(fenced("no longer held".into()));
        }
        let lease = self
            .leases
            .get(&self.lease)
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
