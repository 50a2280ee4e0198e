//! Product rule 5, watched end to end: an Application stuck on a commit
//! that fails validation raises `NotSyncedTooLong` after its
//! `alertNotSyncedAfter`, with a Warning Event, a notification, metrics and
//! a real Prometheus alert; the fix clears every one of them. A flapping
//! app costs a handful of Event writes a minute, not one per loop.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};
use tether_core::ConditionStatus;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::metrics::{installed, run_serving, run_serving_with, scrape, series};
use support::{Repo, config_map, tether_ok};
use tether_controller::api::Application;
use tether_controller::api::application::NOT_SYNCED_TOO_LONG_CONDITION;
use tether_core::SyncStatus;
use tether_testkit::prometheus::{AlertState, Prometheus, Target};
use tether_testkit::{
    Receiver, TestNamespace, application, condition, eventually, free_port, has_condition,
    repo_root, status_of,
};

/// A ConfigMap the API server refuses: `bad key!` is not a valid data key.
fn invalid_config_map(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  \"bad key!\": x\n"
    )
}

/// Application `name` for `path` of `repo`, polled every second, syncing
/// itself, alerting after `alert_after`.
fn create_app(ns: &TestNamespace, repo: &Repo, name: &str, path: &str, alert_after: &str) {
    let app = application(name, &ns.name, &repo.url(), path)
        .interval("1s")
        .sync_policy(json!({"automated": true, "alertNotSyncedAfter": alert_after}));
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &app.manifest().to_string());
}

/// The Events (events.k8s.io/v1) regarding Application `app` with
/// `reason`: their type and note.
async fn events(ns: &TestNamespace, app: &str, reason: &str) -> Vec<(String, String)> {
    let events: Api<Event> = ns.api();
    let list = events.list(&ListParams::default()).await.unwrap();
    list.items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("Application") && r.name.as_deref() == Some(app)
            })
        })
        .map(|e| (e.type_.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// Waits until app `name`'s `tether_app_not_synced_seconds` and
/// `tether_app_not_synced_too_long`, read from one scrape, satisfy `ok`
/// (the metrics read the controller's cache, a moment behind the API).
async fn not_synced_metrics(port: u16, token: &str, name: &str, ok: impl Fn(f64, f64) -> bool) {
    eventually(&format!("the not-synced metrics of {name}"), || async {
        let body = scrape(port, Some(token)).ok()?.body;
        let of_app = |metric| {
            series(&body, metric)
                .into_iter()
                .find(|(labels, _)| labels.get("name").map(String::as_str) == Some(name))
                .map(|(_, value)| value)
        };
        let seconds = of_app("tether_app_not_synced_seconds")?;
        ok(seconds, of_app("tether_app_not_synced_too_long")?).then_some(())
    })
    .await
}

/// A notification of `event` about app `name` that `receiver` got.
async fn notified(receiver: &Receiver, event: &str, name: &str) -> Value {
    eventually(&format!("a {event} notification about {name}"), || async {
        receiver
            .requests()
            .iter()
            .map(|r| r.json())
            .find(|body| body["event"] == event && body["name"] == name)
    })
    .await
}

fn seconds_between(from: &str, to: &str) -> f64 {
    let from: Timestamp = from.parse().expect("an RFC 3339 time");
    let to: Timestamp = to.parse().expect("an RFC 3339 time");
    to.duration_since(from).as_secs_f64()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_failing_validation_raises_the_alert_event_notification_and_metric_and_the_fix_clears_them()
 {
    let (ns, token) = installed("alerting").await;
    let receiver = Receiver::ok();
    let hook = receiver.url("/tether");
    let repo = Repo::new();
    repo.commit(
        &[("app/settings.yaml", config_map("settings", "hello"))],
        "good",
    );
    let port = free_port();
    let _controller = run_serving_with(&ns, "alerting", port, &["--notify-webhook", &hook]);
    create_app(&ns, &repo, "shop", "app", "5s");
    let apps: Api<Application> = ns.api();
    status_of(&apps, "shop", "Synced", |s| {
        s.sync.status == SyncStatus::Synced
    })
    .await;

    // A commit the API server refuses: nothing applies, the app is stuck.
    repo.commit(
        &[("app/settings.yaml", invalid_config_map("settings"))],
        "bad",
    );
    let stuck = status_of(&apps, "shop", "notSyncedSince", |s| {
        s.sync.not_synced_since.is_some()
    })
    .await;
    let since = stuck.sync.not_synced_since.clone().unwrap();
    let raised = status_of(&apps, "shop", "NotSyncedTooLong=True", |s| {
        has_condition(s, NOT_SYNCED_TOO_LONG_CONDITION, ConditionStatus::True)
    })
    .await;
    let alert = condition(&raised, NOT_SYNCED_TOO_LONG_CONDITION).unwrap();
    let after = seconds_between(&since, alert.last_transition_time.as_deref().unwrap());
    println!("NotSyncedTooLong raised {after:.1} s after notSyncedSince ({since})");
    assert!(
        (5.0..=15.0).contains(&after),
        "raised after {after} s: {alert:?}"
    );
    assert!(alert.message.contains("settings"), "says why: {alert:?}");
    assert_eq!(alert.reason, "ValidationFailed", "{alert:?}");

    // A Warning Event, a notification, the metrics, and `tether status`.
    let warned = eventually("a NotSyncedTooLong Event", || async {
        let found = events(&ns, "shop", "NotSyncedTooLong").await;
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert_eq!(warned[0].0, "Warning", "{warned:?}");
    let notification = notified(&receiver, "not-synced-too-long", "shop").await;
    assert_eq!(
        notification["namespace"],
        ns.name.as_str(),
        "{notification}"
    );
    assert_eq!(notification["severity"], "Warning", "{notification}");
    not_synced_metrics(port, &token, "shop", |seconds, too_long| {
        seconds > 5.0 && too_long == 1.0
    })
    .await;
    let shown = tether_ok(&ns, &["status", "-n", &ns.name]);
    assert!(shown.contains('⚠'), "{shown}");
    let detail = tether_ok(&ns, &["status", "shop", "-n", &ns.name]);
    assert!(detail.contains("Not synced"), "{detail}");
    assert!(
        detail.contains("ValidationFailed") || detail.contains("settings"),
        "{detail}"
    );

    // The fix clears all three.
    repo.commit(
        &[("app/settings.yaml", config_map("settings", "fixed"))],
        "fix",
    );
    let fixed = status_of(&apps, "shop", "Synced and NotSyncedTooLong=False", |s| {
        s.sync.status == SyncStatus::Synced
            && has_condition(s, NOT_SYNCED_TOO_LONG_CONDITION, ConditionStatus::False)
    })
    .await;
    assert_eq!(fixed.sync.not_synced_since, None);
    let cleared = eventually("a NotSyncedTooLongCleared Event", || async {
        let found = events(&ns, "shop", "NotSyncedTooLongCleared").await;
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert_eq!(cleared[0].0, "Normal", "{cleared:?}");
    notified(&receiver, "not-synced-too-long-cleared", "shop").await;
    not_synced_metrics(port, &token, "shop", |seconds, too_long| {
        seconds == 0.0 && too_long == 0.0
    })
    .await;
    let shown = tether_ok(&ns, &["status", "-n", &ns.name]);
    assert!(!shown.contains('⚠'), "{shown}");
}

/// The shipped rules, with `TetherAppNotSyncedTooLong`'s `for:` cut from a
/// minute to a second, written under `dir`.
fn rules_firing_fast(dir: &std::path::Path) -> PathBuf {
    let shipped = std::fs::read_to_string(repo_root().join("deploy/monitoring/tether-rules.yaml"))
        .expect("the shipped rules");
    let marker = "- alert: TetherAppNotSyncedTooLong";
    let at = shipped.find(marker).expect("the rule is shipped");
    let (before, rule) = shipped.split_at(at);
    let rule = rule.replacen("for: 1m", "for: 1s", 1);
    let path = dir.join("tether-rules.yaml");
    std::fs::write(&path, format!("{before}{rule}")).expect("writing the rules");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_prometheus_scraping_tether_sees_the_matrix_and_fires_the_alert_for_a_stuck_app() {
    let (ns, token) = installed("prometheus").await;
    let repo = Repo::new();
    repo.commit(
        &[
            ("good/settings.yaml", config_map("good", "hello")),
            ("stuck/settings.yaml", invalid_config_map("stuck")),
        ],
        "one good app, one stuck",
    );
    let port = free_port();
    let _controller = run_serving(&ns, "prometheus", port);
    create_app(&ns, &repo, "good", "good", "1h");
    create_app(&ns, &repo, "stuck", "stuck", "3s");

    let dir = tempfile::tempdir().unwrap();
    let rules = rules_firing_fast(dir.path());
    let target = Target {
        job: "tether".to_string(),
        address: format!("127.0.0.1:{port}"),
        bearer_token: Some(token),
    };
    let prometheus = Prometheus::start(&[target], &[rules], Duration::from_millis(500)).await;

    let matrix = prometheus
        .wait_for_query(
            r#"tether_app_info{name="good",sync="Synced",health="Healthy"}"#,
            Duration::from_secs(90),
            |result| result.as_array().is_some_and(|r| r.len() == 1),
        )
        .await;
    println!("the matrix for good: {matrix}");
    let started = Instant::now();
    let alert = prometheus
        .wait_for_alert(
            "TetherAppNotSyncedTooLong",
            AlertState::Firing,
            Duration::from_secs(90),
        )
        .await;
    println!(
        "TetherAppNotSyncedTooLong firing after {:?} more",
        started.elapsed()
    );
    assert_eq!(alert.labels.get("name").map(String::as_str), Some("stuck"));
    assert_eq!(alert.labels.get("namespace"), Some(&ns.name));
    let firing: Vec<String> = prometheus
        .alerts()
        .await
        .into_iter()
        .filter(|a| a.name == "TetherAppNotSyncedTooLong")
        .filter_map(|a| a.labels.get("name").cloned())
        .collect();
    assert_eq!(firing, ["stuck"], "only the stuck app alerts");
}

/// A Deployment `web` with `replicas`.
fn deployment(replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n        - name: web\n          image: web:1\n"
    )
}

/// Event writes (create and patch of `events`) the controller has made.
fn event_writes(port: u16, token: &str) -> f64 {
    let body = scrape(port, Some(token)).expect("/metrics answers").body;
    series(&body, "tether_kube_requests_total")
        .into_iter()
        .filter(|(labels, _)| labels.get("resource").map(String::as_str) == Some("events"))
        .filter(|(labels, _)| {
            matches!(
                labels.get("verb").map(String::as_str),
                Some("create" | "patch" | "update")
            )
        })
        .map(|(_, value)| value)
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_writer_scaling_an_apps_deployment_every_second_for_a_minute_costs_at_most_ten_event_writes()
 {
    let (ns, token) = installed("flapping").await;
    let repo = Repo::new();
    repo.commit(&[("app/web.yaml", deployment(2))], "web");
    let port = free_port();
    let _controller = run_serving(&ns, "flapping", port);
    let app = application("shop", &ns.name, &repo.url(), "app")
        .sync_policy(json!({"automated": true, "selfHeal": true}));
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &app.manifest().to_string());
    let apps: Api<Application> = ns.api();
    status_of(&apps, "shop", "Synced", |s| {
        s.sync.status == SyncStatus::Synced
    })
    .await;
    // Whatever the first sync wrote is done.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = event_writes(port, &token);

    // Another writer scales every second for a minute; self-heal fights it.
    let started = Instant::now();
    let mut scaled = 0;
    while started.elapsed() < Duration::from_secs(60) {
        let replicas = format!("--replicas={}", 3 + scaled % 3);
        ns.kubectl_ok(&["scale", "deployment/web", &replicas]);
        scaled += 1;
        let next = Duration::from_secs(scaled as u64);
        if let Some(wait) = next.checked_sub(started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
    }
    let writes = event_writes(port, &token) - before;
    let drifts = events(&ns, "shop", "DriftDetected").await.len()
        + events(&ns, "shop", "DriftReverted").await.len()
        + events(&ns, "shop", "SelfHealBackOff").await.len();
    println!("{scaled} scales in 60 s: {writes} Event writes by the controller; {drifts} Events");
    assert!(scaled >= 50, "the writer scaled only {scaled} times");
    assert!(
        writes <= 10.0,
        "{writes} Event writes in a minute of flapping"
    );
    assert!(drifts >= 1, "the flapping was told as Events");
    let status = status_of(&apps, "shop", "reconciled", |_| true).await;
    println!(
        "conditions after the minute: {:?}",
        status
            .conditions
            .iter()
            .map(|c| format!("{}={} {}", c.type_, c.status, c.reason))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_notify_webhook_that_is_not_an_http_url_is_refused_at_start_without_repeating_it() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args([
            "run",
            "--notify-webhook",
            "ftp://user:s3cret@example.com/hook",
        ])
        .output()
        .expect("tether runs");
    let said = support::text(&output);
    assert!(!output.status.success(), "{said}");
    assert!(said.contains("--notify-webhook #1"), "{said}");
    assert!(!said.contains("s3cret"), "{said}");
}
