//! The controller's Prometheus metrics (text exposition on `/metrics`).
//!
//! Cardinality stays O(apps): series are per Application, per repository
//! or per API verb and resource — never per managed object. App-level
//! series are reported by the leader only, so a dashboard summing over
//! replicas never counts an app twice.
//!
//! Every name the controller exports is in [`NAMES`]; the shipped alert
//! rules and Grafana dashboard (`deploy/monitoring/`) are checked against
//! that list.
//!
//! The per-app gauges ([`apps`]) are computed from the watched
//! Applications' status at scrape time, while [`Metrics::lead`] has them
//! attached; `/metrics` itself is served by [`crate::serve::http::metrics`].

pub mod apps;

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tether_core::OperationPhase;
use tether_core::drift::DriftKind;

use crate::api::{BreakGlass, StoredApplication};
use crate::observe::live::AppKey;
use apps::{AppCollector, Sources};

/// Every metric name the controller exports (counters with their `_total`,
/// histograms by their base name).
pub const NAMES: &[&str] = &[
    "tether_app_info",
    "tether_app_not_synced_seconds",
    "tether_app_not_synced_too_long",
    "tether_app_drift_total",
    "tether_app_self_heal_total",
    "tether_app_sync_total",
    "tether_sync_duration_seconds",
    "tether_git_fetch_duration_seconds",
    "tether_render_duration_seconds",
    "tether_git_fetch_errors_total",
    "tether_break_glass_open",
    "tether_prune_blocked_total",
    "tether_kube_requests_total",
    "tether_notifications_sent_total",
    "tether_notifications_dropped_total",
    "tether_leader",
    "tether_shard_held",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AppLabels {
    pub namespace: String,
    pub name: String,
}

impl From<&AppKey> for AppLabels {
    fn from((namespace, name): &AppKey) -> Self {
        AppLabels {
            namespace: namespace.clone(),
            name: name.clone(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DriftLabels {
    #[prometheus(flatten)]
    pub app: AppLabels,
    /// manual | accidental | emergency
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SyncLabels {
    #[prometheus(flatten)]
    pub app: AppLabels,
    /// Succeeded | Failed
    pub phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RepoLabels {
    /// The repository URL, without credentials.
    pub repo: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// get | list | watch | create | update | patch | delete | …
    pub verb: String,
    /// The resource (`deployments`, `applications`, …), or the path's
    /// first segment for non-resource requests.
    pub resource: String,
    /// The HTTP status code, or `error` when no response came.
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShardLabels {
    /// The shard's index, `0..N`.
    pub shard: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// delivered | failed
    pub result: String,
}

/// The metrics of one controller process.
pub struct Metrics {
    registry: Registry,
    drift: Family<DriftLabels, Counter>,
    self_heal: Family<AppLabels, Counter>,
    syncs: Family<SyncLabels, Counter>,
    prune_blocked: Family<AppLabels, Counter>,
    sync_duration: Histogram,
    fetch_duration: Histogram,
    render_duration: Histogram,
    fetch_errors: Family<RepoLabels, Counter>,
    kube_requests: Family<RequestLabels, Counter>,
    notifications_sent: Family<ResultLabels, Counter>,
    notifications_dropped: Counter,
    leader: Gauge,
    shards: Family<ShardLabels, Gauge>,
    apps: AppCollector,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("leader", &self.leader.get())
            .finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let seconds = || Histogram::new(exponential_buckets(0.005, 2.0, 14));
        let metrics = Metrics {
            drift: Family::default(),
            self_heal: Family::default(),
            syncs: Family::default(),
            prune_blocked: Family::default(),
            sync_duration: seconds(),
            fetch_duration: seconds(),
            render_duration: seconds(),
            fetch_errors: Family::default(),
            kube_requests: Family::default(),
            notifications_sent: Family::default(),
            notifications_dropped: Counter::default(),
            leader: Gauge::default(),
            shards: Family::default(),
            apps: AppCollector::default(),
            registry: Registry::default(),
        };
        registry.register(
            "tether_app_drift",
            "Drift detected, by kind (manual, accidental, emergency)",
            metrics.drift.clone(),
        );
        registry.register(
            "tether_app_self_heal",
            "Drift reverted by self-heal",
            metrics.self_heal.clone(),
        );
        registry.register(
            "tether_app_sync",
            "Syncs run, by phase (Succeeded, Failed)",
            metrics.syncs.clone(),
        );
        registry.register(
            "tether_prune_blocked",
            "Prunes held back by the circuit breaker",
            metrics.prune_blocked.clone(),
        );
        registry.register(
            "tether_sync_duration_seconds",
            "How long a sync took, dry run to last wave",
            metrics.sync_duration.clone(),
        );
        registry.register(
            "tether_git_fetch_duration_seconds",
            "How long fetching a revision took",
            metrics.fetch_duration.clone(),
        );
        registry.register(
            "tether_render_duration_seconds",
            "How long rendering a revision's manifests took",
            metrics.render_duration.clone(),
        );
        registry.register(
            "tether_git_fetch_errors",
            "Failed fetches, by repository",
            metrics.fetch_errors.clone(),
        );
        registry.register(
            "tether_kube_requests",
            "Requests to the Kubernetes API server, by verb, resource and status code",
            metrics.kube_requests.clone(),
        );
        registry.register(
            "tether_notifications_sent",
            "Notifications, by final result (delivered, failed)",
            metrics.notifications_sent.clone(),
        );
        registry.register(
            "tether_notifications_dropped",
            "Notifications dropped because the queue was full",
            metrics.notifications_dropped.clone(),
        );
        registry.register(
            "tether_leader",
            "1 while this replica leads (and reports app metrics)",
            metrics.leader.clone(),
        );
        registry.register(
            "tether_shard_held",
            "Per shard (tether run --shards): 1 while this replica holds its Lease and reconciles its apps",
            metrics.shards.clone(),
        );
        registry.register_collector(Box::new(metrics.apps.clone()));
        Metrics {
            registry,
            ..metrics
        }
    }

    pub fn drift_detected(&self, app: &AppKey, kind: DriftKind) {
        self.drift
            .get_or_create(&DriftLabels {
                app: app.into(),
                kind: kind.as_str().to_ascii_lowercase(),
            })
            .inc();
    }

    pub fn self_healed(&self, app: &AppKey) {
        self.self_heal.get_or_create(&app.into()).inc();
    }

    pub fn prune_blocked(&self, app: &AppKey) {
        self.prune_blocked.get_or_create(&app.into()).inc();
    }

    pub fn sync_finished(&self, app: &AppKey, phase: OperationPhase, took: Duration) {
        self.syncs
            .get_or_create(&SyncLabels {
                app: app.into(),
                phase: phase.as_str().to_string(),
            })
            .inc();
        self.sync_duration.observe(took.as_secs_f64());
    }

    pub fn git_fetched(&self, repo: &str, took: Duration, ok: bool) {
        self.fetch_duration.observe(took.as_secs_f64());
        if !ok {
            self.fetch_errors
                .get_or_create(&RepoLabels {
                    repo: repo.to_string(),
                })
                .inc();
        }
    }

    pub fn rendered(&self, took: Duration) {
        self.render_duration.observe(took.as_secs_f64());
    }

    pub fn kube_request(&self, verb: &str, resource: &str, code: &str) {
        self.kube_requests
            .get_or_create(&RequestLabels {
                verb: verb.to_string(),
                resource: resource.to_string(),
                code: code.to_string(),
            })
            .inc();
    }

    pub fn notification_sent(&self, delivered: bool) {
        let result = if delivered { "delivered" } else { "failed" };
        self.notifications_sent
            .get_or_create(&ResultLabels {
                result: result.to_string(),
            })
            .inc();
    }

    pub fn notification_dropped(&self) {
        self.notifications_dropped.inc();
    }

    /// Whether this replica leads: a replica that stops leading forgets its
    /// per-app series, so only the leader reports any.
    pub fn set_leading(&self, leading: bool) {
        self.leader.set(i64::from(leading));
        if !leading {
            self.drift.clear();
            self.self_heal.clear();
            self.syncs.clear();
            self.prune_blocked.clear();
        }
    }

    /// Which of `count` shards this replica holds (`held`); a replica
    /// that holds some reports the per-app gauges of their apps only.
    pub fn set_shards(&self, count: u32, held: &std::collections::BTreeSet<u32>) {
        for shard in 0..count {
            let labels = ShardLabels {
                shard: shard.to_string(),
            };
            self.shards
                .get_or_create(&labels)
                .set(i64::from(held.contains(&shard)));
        }
    }

    /// Reports the per-app gauges of the Applications in `apps` (and their
    /// open windows in `windows`, granted at most `cap` at once) until the
    /// returned guard is dropped: call it when this replica starts leading.
    pub fn lead(
        self: &Arc<Self>,
        apps: Store<StoredApplication>,
        windows: Store<BreakGlass>,
        cap: Duration,
    ) -> Leading {
        *self.apps.0.write().expect("lock") = Some(Sources {
            apps,
            windows,
            cap,
            owned: None,
        });
        self.set_leading(true);
        Leading(self.clone())
    }

    /// [`Metrics::lead`] for a sharded replica: only the apps `owned`
    /// says this replica reconciles are reported.
    pub fn lead_shards(
        self: &Arc<Self>,
        apps: Store<StoredApplication>,
        windows: Store<BreakGlass>,
        cap: Duration,
        owned: apps::Owned,
    ) -> Leading {
        let leading = self.lead(apps, windows, cap);
        if let Some(sources) = self.apps.0.write().expect("lock").as_mut() {
            sources.owned = Some(owned);
        }
        leading
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// This replica leads: the per-app gauges are reported until this is
/// dropped (the lease lost, or the controller stopping).
#[must_use = "the per-app gauges stop when this is dropped"]
pub struct Leading(Arc<Metrics>);

impl Drop for Leading {
    fn drop(&mut self) {
        *self.0.apps.0.write().expect("lock") = None;
        self.0.set_leading(false);
    }
}

/// A repository URL as a label: without the user and password an HTTPS
/// URL may carry (`https://token@host/…`). An SSH user (`git@host:…`) is
/// kept; it is no secret.
pub fn repo_label(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;
    use serde_json::json;

    fn app_store(names: &[&str]) -> Store<StoredApplication> {
        let mut writer = Writer::<StoredApplication>::default();
        for name in names {
            let app = StoredApplication::decode(&json!({
                "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
                "metadata": {"name": name, "namespace": "shop"},
                "spec": {"source": {"repoURL": "https://git.example/site.git", "path": "app"},
                         "destination": {"namespace": "shop"}},
                "status": {"sync": {"status": "Synced", "revision": "a1b2"},
                           "health": {"status": "Healthy"}, "state": "Converged"}
            }));
            writer.apply_watcher_event(&watcher::Event::Apply(app));
        }
        writer.as_reader()
    }

    fn lines<'a>(text: &'a str, metric: &str) -> Vec<&'a str> {
        text.lines()
            .filter(|line| {
                line.starts_with(&format!("{metric}{{")) || line.starts_with(&format!("{metric} "))
            })
            .collect()
    }

    #[test]
    fn a_sharded_replica_reports_its_shards_and_only_their_apps() {
        let metrics = Arc::new(Metrics::new());
        let windows = Writer::<BreakGlass>::default().as_reader();
        metrics.set_shards(3, &std::collections::BTreeSet::from([1]));
        let _leading = metrics.lead_shards(
            app_store(&["web", "db"]),
            windows,
            Duration::from_secs(3600),
            Arc::new(|_, name| name == "web"),
        );
        let text = metrics.encode();
        let mut held = lines(&text, "tether_shard_held");
        held.sort();
        assert_eq!(
            held,
            [
                r#"tether_shard_held{shard="0"} 0"#,
                r#"tether_shard_held{shard="1"} 1"#,
                r#"tether_shard_held{shard="2"} 0"#,
            ]
        );
        let info = lines(&text, "tether_app_info");
        assert_eq!(info.len(), 1, "{info:?}");
        assert!(info[0].contains(r#"name="web""#), "{info:?}");
    }

    #[test]
    fn only_while_leading_are_app_gauges_reported() {
        let metrics = Arc::new(Metrics::new());
        let apps = app_store(&["web", "db"]);
        let windows = Writer::<BreakGlass>::default().as_reader();
        assert_eq!(
            lines(&metrics.encode(), "tether_app_info"),
            Vec::<&str>::new()
        );
        assert_eq!(
            lines(&metrics.encode(), "tether_leader"),
            ["tether_leader 0"]
        );

        let leading = metrics.lead(apps, windows, Duration::from_secs(3600));
        metrics.drift_detected(&("shop".into(), "web".into()), DriftKind::Manual);
        let text = metrics.encode();
        assert_eq!(lines(&text, "tether_leader"), ["tether_leader 1"]);
        assert_eq!(
            lines(&text, "tether_app_info"),
            [
                r#"tether_app_info{namespace="shop",name="db",sync="Synced",health="Healthy",state="Converged",revision="a1b2"} 1"#,
                r#"tether_app_info{namespace="shop",name="web",sync="Synced",health="Healthy",state="Converged",revision="a1b2"} 1"#,
            ]
        );
        for gauge in [
            "tether_app_not_synced_seconds",
            "tether_app_not_synced_too_long",
            "tether_break_glass_open",
        ] {
            assert_eq!(lines(&text, gauge).len(), 2, "{gauge}: {text}");
        }
        assert_eq!(
            lines(&text, "tether_app_drift_total"),
            [r#"tether_app_drift_total{namespace="shop",name="web",kind="manual"} 1"#]
        );

        // Leading ends: no app series, per-app counters forgotten.
        drop(leading);
        let text = metrics.encode();
        assert_eq!(lines(&text, "tether_leader"), ["tether_leader 0"]);
        for metric in [
            "tether_app_info",
            "tether_app_drift_total",
            "tether_break_glass_open",
        ] {
            assert!(lines(&text, metric).is_empty(), "{metric}: {text}");
        }
    }

    #[test]
    fn every_exported_name_is_in_names() {
        let metrics = Arc::new(Metrics::new());
        let _leading = metrics.lead(
            app_store(&["web"]),
            Writer::<BreakGlass>::default().as_reader(),
            Duration::from_secs(3600),
        );
        let text = metrics.encode();
        let typed: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE ")?.split(' ').next())
            .collect();
        for name in &typed {
            let exported = match *name {
                counter if text.contains(&format!("# TYPE {counter} counter")) => {
                    format!("{counter}_total")
                }
                other => other.to_string(),
            };
            assert!(
                NAMES.contains(&exported.as_str()),
                "{exported} not in NAMES"
            );
        }
        for gauge in [
            "tether_app_info",
            "tether_break_glass_open",
            "tether_leader",
        ] {
            assert!(typed.contains(&gauge), "{gauge}: {text}");
        }
    }

    #[test]
    fn a_repository_label_carries_no_credentials() {
        let table = [
            (
                "https://x-token:s3cret@github.com/shop/site.git",
                "https://github.com/shop/site.git",
            ),
            (
                "https://ghp_abc@github.com/shop/site.git",
                "https://github.com/shop/site.git",
            ),
            (
                "https://github.com/shop/site.git",
                "https://github.com/shop/site.git",
            ),
            ("file:///srv/git/site", "file:///srv/git/site"),
            (
                "git@github.com:shop/site.git",
                "git@github.com:shop/site.git",
            ),
            (
                "ssh://git@host:22/shop/site.git",
                "ssh://host:22/shop/site.git",
            ),
        ];
        for (url, label) in table {
            assert_eq!(repo_label(url), label, "{url}");
        }
    }
}
