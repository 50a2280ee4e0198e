//! The per-Application gauges, computed at scrape time from the watched
//! Applications and break-glass windows — from status, not from memory,
//! so they survive a restart and never count anything twice — and only
//! while this replica leads: another replica reports none.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use kube::ResourceExt;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use tether_core::window::WindowPhase;

use super::AppLabels;
use crate::api::application::{NOT_SYNCED_TOO_LONG_CONDITION, holds};
use crate::api::break_glass::parse_time;
use crate::api::{ApplicationStatus, BreakGlass, StoredApplication};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InfoLabels {
    pub namespace: String,
    pub name: String,
    /// Synced | OutOfSync | Unknown; empty when the app has no status.
    pub sync: String,
    /// Healthy | Progressing | Degraded | Suspended | Missing | Unknown.
    pub health: String,
    /// Converged | AppliedButFailing | DriftedOrPending | Broken.
    pub state: String,
    /// The commit live state was last synced to.
    pub revision: String,
}

/// The gauges of one Application at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct AppGauges {
    pub info: InfoLabels,
    /// Seconds since `status.sync.notSyncedSince`; 0 while Synced.
    pub not_synced_seconds: f64,
    /// Whether condition `NotSyncedTooLong` is `True`.
    pub not_synced_too_long: bool,
    /// Open break-glass windows.
    pub break_glass_open: usize,
}

/// The gauges of the Application `namespace/name` with `status` (`None`
/// when it has none or does not decode), `open_windows` of its
/// break-glass windows open, at `now`.
pub fn gauges(
    namespace: &str,
    name: &str,
    status: Option<&ApplicationStatus>,
    open_windows: usize,
    now: SystemTime,
) -> AppGauges {
    let word = |text: &str| text.to_string();
    let info = InfoLabels {
        namespace: namespace.to_string(),
        name: name.to_string(),
        sync: status.map_or_else(String::new, |s| word(s.sync.status.as_str())),
        health: status.map_or_else(String::new, |s| word(s.health.status.as_str())),
        state: status
            .and_then(|s| s.state)
            .map_or_else(String::new, |state| word(state.as_str())),
        revision: status
            .and_then(|s| s.sync.revision.clone())
            .unwrap_or_default(),
    };
    let not_synced_seconds = status
        .and_then(|s| parse_time(s.sync.not_synced_since.as_deref()?))
        .and_then(|since| now.duration_since(since).ok())
        .map_or(0.0, |lasted| lasted.as_secs_f64());
    let not_synced_too_long =
        status.is_some_and(|s| holds(&s.conditions, NOT_SYNCED_TOO_LONG_CONDITION));
    AppGauges {
        info,
        not_synced_seconds,
        not_synced_too_long,
        break_glass_open: open_windows,
    }
}

/// How many windows are open now, by (namespace, application).
pub fn open_windows(
    windows: &[Arc<BreakGlass>],
    now: SystemTime,
    cap: Duration,
) -> HashMap<(String, String), usize> {
    let mut open = HashMap::new();
    for window in windows {
        let is_open = window
            .checked_times(cap)
            .is_ok_and(|times| times.phase(now) == WindowPhase::Open);
        if is_open {
            let app = (
                window.namespace().unwrap_or_default(),
                window.spec.application.clone(),
            );
            *open.entry(app).or_default() += 1;
        }
    }
    open
}

/// What the leader reads its gauges from.
#[derive(Clone)]
pub(super) struct Sources {
    pub apps: Store<StoredApplication>,
    pub windows: Store<BreakGlass>,
    /// The longest grant a window may have (`--max-break-glass-ttl`).
    pub cap: Duration,
    /// When sharded: whether this replica reconciles app `namespace/name`.
    pub owned: Option<Owned>,
}

/// Whether this replica reconciles the app `namespace/name`.
pub type Owned = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// The collector of the per-Application gauges: empty until attached to
/// the leader's stores.
#[derive(Clone, Default)]
pub(super) struct AppCollector(pub Arc<RwLock<Option<Sources>>>);

impl std::fmt::Debug for AppCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let attached = self.0.read().map(|s| s.is_some()).unwrap_or_default();
        f.debug_struct("AppCollector")
            .field("attached", &attached)
            .finish()
    }
}

impl AppCollector {
    /// The gauges of every watched Application, sorted by namespace and name.
    pub fn gauges(&self, now: SystemTime) -> Vec<AppGauges> {
        let Some(sources) = self.0.read().expect("lock").clone() else {
            return Vec::new();
        };
        let open = open_windows(&sources.windows.state(), now, sources.cap);
        let mut all: Vec<AppGauges> = sources
            .apps
            .state()
            .iter()
            .filter(|stored| match &sources.owned {
                Some(owned) => owned(&stored.namespace().unwrap_or_default(), &stored.name_any()),
                None => true,
            })
            .map(|stored| {
                let (namespace, name) = (stored.namespace().unwrap_or_default(), stored.name_any());
                let status = stored
                    .decoded
                    .as_ref()
                    .ok()
                    .and_then(|app| app.status.as_ref());
                let windows = open
                    .get(&(namespace.clone(), name.clone()))
                    .copied()
                    .unwrap_or_default();
                gauges(&namespace, &name, status, windows, now)
            })
            .collect();
        all.sort_by(|a, b| {
            (&a.info.namespace, &a.info.name).cmp(&(&b.info.namespace, &b.info.name))
        });
        all
    }
}

impl Collector for AppCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let apps = self.gauges(SystemTime::now());
        if apps.is_empty() {
            return Ok(());
        }
        let app = |gauges: &AppGauges| AppLabels {
            namespace: gauges.info.namespace.clone(),
            name: gauges.info.name.clone(),
        };
        let mut family = encoder.encode_descriptor(
            "tether_app_info",
            "One series per Application: its sync and health, operational state and synced revision",
            None,
            MetricType::Gauge,
        )?;
        for gauges in &apps {
            ConstGauge::new(1).encode(family.encode_family(&gauges.info)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "tether_app_not_synced_seconds",
            "Seconds since the Application was last Synced (status.sync.notSyncedSince); 0 while Synced",
            None,
            MetricType::Gauge,
        )?;
        for gauges in &apps {
            ConstGauge::new(gauges.not_synced_seconds)
                .encode(family.encode_family(&app(gauges))?)?;
        }
        let mut family = encoder.encode_descriptor(
            "tether_app_not_synced_too_long",
            "1 while the Application's condition NotSyncedTooLong is True",
            None,
            MetricType::Gauge,
        )?;
        for gauges in &apps {
            let value = i64::from(gauges.not_synced_too_long);
            ConstGauge::new(value).encode(family.encode_family(&app(gauges))?)?;
        }
        let mut family = encoder.encode_descriptor(
            "tether_break_glass_open",
            "Break-glass windows open for the Application",
            None,
            MetricType::Gauge,
        )?;
        for gauges in &apps {
            let value = gauges.break_glass_open as i64;
            ConstGauge::new(value).encode(family.encode_family(&app(gauges))?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(value: serde_json::Value) -> ApplicationStatus {
        serde_json::from_value(value).unwrap()
    }

    fn at(text: &str) -> SystemTime {
        parse_time(text).unwrap()
    }

    const NOW: &str = "2026-01-01T12:00:00Z";

    #[test]
    fn a_synced_app_has_its_matrix_in_the_info_labels_and_zero_not_synced() {
        let synced = status(json!({
            "sync": {"status": "Synced", "revision": "a1b2c3"},
            "health": {"status": "Healthy"},
            "state": "Converged",
        }));
        let gauges = gauges("shop", "web", Some(&synced), 0, at(NOW));
        assert_eq!(
            gauges,
            AppGauges {
                info: InfoLabels {
                    namespace: "shop".into(),
                    name: "web".into(),
                    sync: "Synced".into(),
                    health: "Healthy".into(),
                    state: "Converged".into(),
                    revision: "a1b2c3".into(),
                },
                not_synced_seconds: 0.0,
                not_synced_too_long: false,
                break_glass_open: 0,
            }
        );
    }

    #[test]
    fn an_app_out_of_sync_for_an_hour_counts_from_not_synced_since_and_raises_the_alert() {
        let stuck = status(json!({
            "sync": {"status": "OutOfSync", "revision": "a1b2c3",
                     "notSyncedSince": "2026-01-01T11:00:00Z"},
            "health": {"status": "Degraded"},
            "state": "Broken",
            "conditions": [
                {"type": "Reconciled", "status": "False", "reason": "SyncFailed"},
                {"type": "NotSyncedTooLong", "status": "True", "reason": "SyncFailed"},
            ],
        }));
        let gauges = gauges("shop", "web", Some(&stuck), 2, at(NOW));
        assert_eq!(gauges.info.sync, "OutOfSync");
        assert_eq!(gauges.info.health, "Degraded");
        assert_eq!(gauges.info.state, "Broken");
        assert_eq!(gauges.not_synced_seconds, 3600.0);
        assert!(gauges.not_synced_too_long);
        assert_eq!(gauges.break_glass_open, 2);
    }

    #[test]
    fn a_cleared_alert_or_an_unreadable_time_reports_nothing_wrong() {
        let cleared = status(json!({
            "sync": {"status": "OutOfSync", "notSyncedSince": "not a time"},
            "conditions": [{"type": "NotSyncedTooLong", "status": "False", "reason": "Synced"}],
        }));
        let gauges = gauges("shop", "web", Some(&cleared), 0, at(NOW));
        assert_eq!(gauges.not_synced_seconds, 0.0);
        assert!(!gauges.not_synced_too_long);
        assert_eq!(gauges.info.state, "");
        assert_eq!(gauges.info.revision, "");
    }

    #[test]
    fn an_app_without_status_has_empty_labels() {
        let gauges = gauges("shop", "new", None, 0, at(NOW));
        assert_eq!(
            (gauges.info.sync.as_str(), gauges.info.health.as_str()),
            ("", "")
        );
        assert_eq!(gauges.not_synced_seconds, 0.0);
    }

    fn window(name: &str, app: &str, expires_at: &str, closed: bool) -> Arc<BreakGlass> {
        let mut spec = json!({
            "application": app, "reason": "INC-1: test",
            "openedBy": {"username": "alice", "groups": ["tether:break-glass"]},
            "expiresAt": expires_at,
        });
        if closed {
            spec["close"] =
                json!({"by": "alice", "at": "2026-01-01T11:30:00Z", "resolve": "revert"});
        }
        let value = json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "BreakGlass",
            "metadata": {"name": name, "namespace": "shop",
                         "creationTimestamp": "2026-01-01T11:00:00Z"},
            "spec": spec,
        });
        Arc::new(serde_json::from_value(value).unwrap())
    }

    #[test]
    fn only_open_windows_are_counted_per_app() {
        let windows = [
            window("one", "web", "2026-01-01T13:00:00Z", false),
            window("two", "web", "2026-01-01T12:30:00Z", false),
            window("expired", "web", "2026-01-01T11:30:00Z", false),
            window("closed", "db", "2026-01-01T13:00:00Z", true),
            window("db", "db", "2026-01-01T12:10:00Z", false),
        ];
        let open = open_windows(&windows, at(NOW), Duration::from_secs(24 * 3600));
        let key = |app: &str| ("shop".to_string(), app.to_string());
        assert_eq!(open, HashMap::from([(key("web"), 2), (key("db"), 1)]));
    }
}
