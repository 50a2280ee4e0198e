//! Holding shards (`tether run --shards N`): Applications are split into N
//! shards (`tether_core::shard`), and each replica reconciles the apps of
//! the shards whose Lease `tether-shard-<i>` it holds.
//!
//! Each replica keeps a heartbeat Lease `tether-replica-<identity>`, so the
//! others know it is alive even while it holds no shard. Every [`TICK`]
//! it reads the Leases of the controller's namespace (watched), asks
//! [`tether_core::shard::plan`] which shards it should hold, starts holding
//! those (acquired as soon as they are free or expired) and gives back
//! those the plan gives to another replica — first no longer counting them
//! as held (so no reconcile of their apps starts, and one under way stops
//! at its next fence, see `crate::fence`), then giving the Lease back once
//! no reconcile of their apps is under way ([`Working`]), after at least
//! [`DRAIN`] and at most [`DRAIN_LIMIT`]. A replica that dies stops renewing: its
//! heartbeat and shard Leases expire within their 15 s, and the others
//! take its shards.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tether_core::shard::{self, Shard};
use tokio::sync::watch;

use crate::lease::{self, Hold};
use crate::watch_retry::Retrying;

/// The prefix of the replicas' heartbeat Leases.
pub const HEARTBEAT_PREFIX: &str = "tether-replica-";
/// How often the plan is made again (from the watched Leases: no request
/// unless something changes), so a Lease acquired or expired counts at once.
const TICK: Duration = Duration::from_millis(250);
/// How long a shard given up stops being written before its Lease is
/// given back, at least: a write in flight ends before another replica
/// can take the shard.
const DRAIN: Duration = Duration::from_secs(1);
/// How long a shard given up waits for its reconciles under way to end,
/// at most (a sync waiting on a wave yields well before).
const DRAIN_LIMIT: Duration = Duration::from_secs(30);
/// How long the Leases are watched before the first plan, so a replica
/// starting with others sees them rather than taking every shard.
const SETTLE: Duration = Duration::from_secs(2);
/// Heartbeats of replicas gone this long are deleted.
const FORGET_AFTER: SignedDuration = SignedDuration::from_mins(10);

/// Which apps this replica reconciles: those of the shards it holds.
#[derive(Clone)]
pub struct Shards {
    count: u32,
    held: watch::Receiver<BTreeSet<Shard>>,
    working: Busy,
}

/// Reconciles under way, per shard.
type Busy = Arc<Mutex<BTreeMap<Shard, usize>>>;

/// A reconcile under way of an app of `shard`: while one lives, a shard
/// given up keeps its Lease (see [`Shards::working`]).
pub struct Working {
    shard: Shard,
    busy: Busy,
}

impl Drop for Working {
    fn drop(&mut self) {
        let mut busy = self.busy.lock().expect("lock");
        if let Some(count) = busy.get_mut(&self.shard) {
            *count = count.saturating_sub(1);
        }
    }
}

impl Shards {
    /// How many shards there are.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether this replica holds the shard of app `namespace/name`.
    pub fn owns(&self, namespace: &str, name: &str) -> bool {
        let shard = shard::shard_of(namespace, name, self.count);
        self.held.borrow().contains(&shard)
    }

    /// A reconcile of app `namespace/name` starting, if this replica holds
    /// its shard: its Lease is not given back while the guard lives.
    pub fn working(&self, namespace: &str, name: &str) -> Option<Working> {
        let shard = shard::shard_of(namespace, name, self.count);
        let mut busy = self.working.lock().expect("lock");
        if !self.held.borrow().contains(&shard) {
            return None;
        }
        *busy.entry(shard).or_default() += 1;
        Some(Working {
            shard,
            busy: self.working.clone(),
        })
    }

    /// The shards held, as they change.
    pub fn held(&self) -> watch::Receiver<BTreeSet<Shard>> {
        self.held.clone()
    }

    /// Yields each time this replica starts holding a shard it did not
    /// hold (its apps are then reconciled at once).
    pub fn gained(&self) -> impl futures::Stream<Item = ()> + Send + use<> {
        let seen = self.held.borrow().clone();
        futures::stream::unfold(
            (self.held.clone(), seen),
            |(mut held, mut seen)| async move {
                loop {
                    held.changed().await.ok()?;
                    let now = held.borrow_and_update().clone();
                    let more = now.iter().any(|shard| !seen.contains(shard));
                    seen = now;
                    if more {
                        return Some(((), (held, seen)));
                    }
                }
            },
        )
    }
}

/// A reconcile of app `namespace/name` starting, if this replica
/// reconciles it (it leads, or holds the app's shard): `None` if not.
pub fn working(scope: &Option<Shards>, namespace: &str, name: &str) -> Option<Option<Working>> {
    match scope {
        None => Some(None),
        Some(shards) => shards.working(namespace, name).map(Some),
    }
}

/// Yields when a shard is gained (never when not sharded).
pub fn gained(sharded: &Option<Shards>) -> impl futures::Stream<Item = ()> + Send + use<> {
    match sharded {
        Some(shards) => shards.gained().left_stream(),
        None => futures::stream::pending().right_stream(),
    }
}

/// Keeps the shard gauges, and the pod's label (webhooks are sent to
/// replicas that hold shards), up to date with the shards held.
pub async fn report(
    client: &Client,
    pod: Option<crate::context::ReplicaPod>,
    shards: Shards,
    metrics: Arc<crate::metrics::Metrics>,
) {
    let mut held = shards.held();
    let mut labelled = None;
    loop {
        let now = held.borrow_and_update().clone();
        metrics.set_shards(shards.count(), &now);
        if let Some(pod) = &pod
            && labelled != Some(!now.is_empty())
        {
            lease::label_pod(client, pod, !now.is_empty()).await;
            labelled = Some(!now.is_empty());
        }
        if held.changed().await.is_err() {
            return;
        }
    }
}

/// Keeps this replica's heartbeat and shard Leases (see the module doc).
pub struct Keeper {
    client: Client,
    namespace: String,
    identity: String,
    count: u32,
    leases: Store<Lease>,
    heartbeat: Option<Hold>,
    holding: BTreeMap<Shard, Hold>,
    releasing: Vec<(Instant, Shard, Hold)>,
    held: watch::Sender<BTreeSet<Shard>>,
    working: Busy,
}

/// Starts keeping `count` shards as replica `identity`, with Leases in
/// `namespace`: [`Keeper::run`] does the work, [`Keeper::release`] gives
/// everything back.
pub fn keeper(client: &Client, namespace: &str, identity: &str, count: u32) -> (Shards, Keeper) {
    let (held, seen) = watch::channel(BTreeSet::new());
    let working = Busy::default();
    let keeper = Keeper {
        client: client.clone(),
        namespace: namespace.into(),
        identity: identity.into(),
        count,
        leases: reflector::store().0,
        heartbeat: None,
        holding: BTreeMap::new(),
        releasing: Vec::new(),
        held,
        working: working.clone(),
    };
    let shards = Shards {
        count,
        held: seen,
        working,
    };
    (shards, keeper)
}

impl Keeper {
    /// Keeps the Leases until dropped; a Lease the API server does not
    /// answer for is tried again at the next tick.
    pub async fn run(&mut self) {
        let (store, writer) = reflector::store();
        self.leases = store;
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.namespace);
        let watch =
            reflector::reflector(writer, watcher(api, watcher::Config::default()).retrying())
                .for_each(|event| async move {
                    if let Err(error) = event {
                        tracing::warn!(%error, "the Lease watch was interrupted; retrying");
                    }
                });
        let keep = async {
            let name = heartbeat_name(&self.identity);
            while self.heartbeat.is_none() {
                match lease::hold(&self.client, &self.namespace, &name, &self.identity).await {
                    Ok(beat) => self.heartbeat = Some(beat),
                    Err(error) => {
                        tracing::warn!(%error, "cannot start the heartbeat; retrying");
                        tokio::time::sleep(TICK * 4).await;
                    }
                }
            }
            let _ = self.leases.wait_until_ready().await;
            tokio::time::sleep(SETTLE).await;
            loop {
                self.tick().await;
                tokio::time::sleep(TICK).await;
            }
        };
        tokio::select! {
            () = keep => {}
            () = watch => {}
        }
    }

    /// Plans once: starts holding the shards this replica should hold,
    /// gives up the others.
    async fn tick(&mut self) {
        let now = Timestamp::now();
        let view = View::of(&self.leases.state(), &self.identity, now);
        let plan = shard::plan(self.count, &view.live, &view.holders);
        let mine = plan.get(&self.identity).cloned().unwrap_or_default();
        // Give up what the plan gives to others: stop writing now, give
        // the Lease back once writes in flight are done.
        let given_up: Vec<Shard> = self
            .holding
            .keys()
            .copied()
            .filter(|s| !mine.contains(s))
            .collect();
        for shard in given_up {
            let hold = self.holding.remove(&shard).expect("held");
            tracing::info!(identity = %self.identity, shard, "giving shard up to rebalance");
            self.releasing.push((Instant::now(), shard, hold));
        }
        self.publish();
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.releasing)
            .into_iter()
            .partition(|(since, shard, _)| self.drained(*since, *shard));
        self.releasing = waiting;
        for (_, _, hold) in due {
            let identity = self.identity.clone();
            tokio::spawn(async move { hold.release(&identity).await });
        }
        // Hold what the plan gives this replica, once nobody else does.
        for shard in mine {
            let other = view
                .holders
                .get(&shard)
                .filter(|holder| **holder != self.identity);
            let draining = self.releasing.iter().any(|(_, s, _)| *s == shard);
            match (self.holding.contains_key(&shard), other) {
                (false, None) if !draining => {
                    let name = shard::lease_name(shard);
                    match lease::hold(&self.client, &self.namespace, &name, &self.identity).await {
                        Ok(hold) => {
                            tracing::info!(identity = %self.identity, shard, "taking shard");
                            self.holding.insert(shard, hold);
                        }
                        Err(error) => {
                            tracing::warn!(%error, shard, "cannot take shard yet; retrying");
                        }
                    }
                }
                // Another replica holds it still: it gives it back (by the
                // same plan) or it expires; a lease task started now would
                // sleep until the expiry even if it were given back sooner.
                (true, Some(_)) if !self.holds(shard) => {
                    self.holding.remove(&shard);
                }
                _ => {}
            }
        }
        self.publish();
        if self.holds(0) {
            self.forget_gone(&view.gone).await;
        }
    }

    /// Whether a shard given up `since` may be given back: no reconcile of
    /// its apps under way, or it waited too long for them.
    fn drained(&self, since: Instant, shard: Shard) -> bool {
        let waited = since.elapsed();
        let idle = self
            .working
            .lock()
            .expect("lock")
            .get(&shard)
            .is_none_or(|count| *count == 0);
        if waited >= DRAIN_LIMIT && !idle {
            tracing::warn!(identity = %self.identity, shard, "giving shard up with reconciles under way; they stop at their next fence");
        }
        waited >= DRAIN && idle || waited >= DRAIN_LIMIT
    }

    fn holds(&self, shard: Shard) -> bool {
        self.holding
            .get(&shard)
            .is_some_and(|hold| *hold.leading.borrow())
    }

    /// Tells the reconcilers which shards are held now.
    fn publish(&self) {
        let held: BTreeSet<Shard> = self
            .holding
            .keys()
            .copied()
            .filter(|s| self.holds(*s))
            .collect();
        self.held.send_if_modified(|seen| {
            let changed = *seen != held;
            if changed {
                tracing::info!(identity = %self.identity, shards = ?held, "holding shards");
                *seen = held;
            }
            changed
        });
    }

    /// Deletes the heartbeat Leases of replicas gone for a while (each pod
    /// has its own).
    async fn forget_gone(&self, gone: &[String]) {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.namespace);
        for name in gone {
            if let Err(error) = api.delete(name, &DeleteParams::default()).await {
                tracing::debug!(lease = %name, %error, "deleting a gone replica's heartbeat");
            }
        }
    }

    /// Gives every shard Lease back, then the heartbeat, so the others
    /// take the shards at once.
    pub async fn release(self) {
        self.held.send_replace(BTreeSet::new());
        let identity = &self.identity;
        let shards = self
            .holding
            .into_values()
            .chain(self.releasing.into_iter().map(|(_, _, hold)| hold))
            .map(|hold| hold.release(identity));
        futures::future::join_all(shards).await;
        if let Some(heartbeat) = self.heartbeat {
            heartbeat.release(identity).await;
        }
    }
}

/// The heartbeat Lease of replica `identity`: a valid Lease name whatever
/// the identity (lowercased, other characters dashed, cut to fit).
pub fn heartbeat_name(identity: &str) -> String {
    let cleaned: String = identity
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let name = format!("{HEARTBEAT_PREFIX}{cleaned}");
    name.chars()
        .take(253)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

/// What the Leases say at one moment.
#[derive(Debug, Default, PartialEq)]
struct View {
    /// Replicas whose heartbeat is current (this one always).
    live: BTreeSet<String>,
    /// Current holders of shard Leases.
    holders: BTreeMap<Shard, String>,
    /// Heartbeat Leases gone for longer than [`FORGET_AFTER`].
    gone: Vec<String>,
}

impl View {
    fn of(leases: &[std::sync::Arc<Lease>], identity: &str, now: Timestamp) -> View {
        let mut view = View::default();
        view.live.insert(identity.to_string());
        for lease in leases {
            let name = lease.name_any();
            let holder = current_holder(lease, now);
            if name.starts_with(HEARTBEAT_PREFIX) {
                match holder {
                    Some(holder) => {
                        view.live.insert(holder);
                    }
                    None if expired_for(lease, now) > FORGET_AFTER => view.gone.push(name),
                    None => {}
                }
            } else if let (Some(shard), Some(holder)) = (shard::shard_of_lease(&name), holder) {
                view.holders.insert(shard, holder);
            }
        }
        view
    }
}

/// Who holds `lease` at `now`: a holder whose last renewal plus the
/// duration is still ahead.
fn current_holder(lease: &Lease, now: Timestamp) -> Option<String> {
    let spec = lease.spec.as_ref()?;
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref()?.0;
    let seconds = spec.lease_duration_seconds?;
    (renewed + SignedDuration::from_secs(seconds.into()) > now).then_some(holder)
}

/// How long ago `lease` expired (zero if it has not, or cannot tell).
fn expired_for(lease: &Lease, now: Timestamp) -> SignedDuration {
    let Some(spec) = lease.spec.as_ref() else {
        return SignedDuration::ZERO;
    };
    let renewed = spec
        .renew_time
        .as_ref()
        .map(|t| t.0)
        .or_else(|| spec.acquire_time.as_ref().map(|t| t.0));
    match (renewed, spec.lease_duration_seconds) {
        (Some(renewed), Some(seconds)) => now
            .duration_since(renewed + SignedDuration::from_secs(seconds.into()))
            .max(SignedDuration::ZERO),
        _ => SignedDuration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

    use super::*;

    fn lease(name: &str, holder: &str, renewed: Timestamp) -> Arc<Lease> {
        Arc::new(Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(renewed)),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
        })
    }

    #[test]
    fn a_reconcile_under_way_is_counted_until_it_ends_and_none_starts_unheld() {
        let web = shard::shard_of("shop", "web", 3);
        let (held, seen) = watch::channel(BTreeSet::from([web]));
        let shards = Shards {
            count: 3,
            held: seen,
            working: Busy::default(),
        };
        let count = || shards.working.lock().unwrap().get(&web).copied();
        let first = shards.working("shop", "web").expect("held");
        let second = shards.working("shop", "web").expect("held");
        assert_eq!(count(), Some(2));
        drop((first, second));
        assert_eq!(count(), Some(0));
        held.send_replace(BTreeSet::new());
        assert!(shards.working("shop", "web").is_none());
        assert!(!shards.owns("shop", "web"));
    }

    #[test]
    fn heartbeat_names_are_valid_lease_names() {
        assert_eq!(heartbeat_name("tether-0"), "tether-replica-tether-0");
        assert_eq!(heartbeat_name("Pod_A.b"), "tether-replica-pod-a-b");
        assert!(heartbeat_name(&"x".repeat(400)).len() <= 253);
    }

    #[test]
    fn the_view_counts_current_heartbeats_and_holders_only() {
        let now = Timestamp::now();
        let old = now - SignedDuration::from_secs(20);
        let ancient = now - SignedDuration::from_mins(30);
        let leases = [
            lease("tether-replica-a", "a", now),
            lease("tether-replica-b", "b", old),
            lease("tether-replica-c", "c", ancient),
            lease("tether-replica-d", "", now),
            lease("tether-shard-0", "a", now),
            lease("tether-shard-1", "b", old),
            lease("tether-controller", "a", now),
        ];
        let view = View::of(&leases, "me", now);
        assert_eq!(view.live, BTreeSet::from(["a".into(), "me".into()]));
        assert_eq!(view.holders, BTreeMap::from([(0, "a".into())]));
        assert_eq!(view.gone, vec!["tether-replica-c".to_string()]);
    }
}
