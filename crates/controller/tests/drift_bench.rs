//! Benchmark (prints figures; run with `--ignored --nocapture`): drift
//! detection and self-heal latency over 100 `kubectl patch` changes, and
//! the API requests spent per healed drift, counted from the API server's
//! own `apiserver_request_total` metric.
//!
//! `cargo test -p tether-controller --test drift_bench -- --ignored --nocapture`

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use support::{Repo, config_for, create_app_with, start_controller_with, status_where, web};
use tether_controller::Config;
use tether_core::drift::FlapPolicy;
use tether_testkit::TestNamespace;

const CHANGES: usize = 100;

#[tokio::test(flavor = "multi_thread")]
#[ignore = "benchmark: prints figures"]
async fn drift_detection_and_self_heal_latency() {
    let ns = TestNamespace::create("bench-drift").await;
    let repo = Repo::new();
    repo.commit(&web(2, "hello"), "first");
    // The benchmark reverts one field 100 times on purpose: no flap guard.
    let config = Config {
        flap_policy: FlapPolicy {
            max_reverts: usize::MAX,
            ..FlapPolicy::default()
        },
        ..config_for(&ns)
    };
    start_controller_with(&ns, config).await;
    let apps = create_app_with(&ns, &repo, json!({})).await;
    status_where(&apps, "Synced", |s| s.sync.status == "Synced").await;

    let configs: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let name = |n: &str| watcher::Config::default().fields(&format!("metadata.name={n}"));
    let mut config_events = watcher(configs, name("settings")).applied_objects().boxed();
    let mut app_events = watcher(apps.clone(), name("shop"))
        .applied_objects()
        .boxed();
    tokio::time::sleep(Duration::from_secs(1)).await;

    let before = request_counts(&ns).await;
    let (mut detect, mut heal) = (Vec::new(), Vec::new());
    for change in 0..CHANGES {
        let value = format!("drift-{change}");
        let patch = format!(r#"{{"data":{{"greeting":"{value}"}}}}"#);
        let output = ns.kubectl(&["patch", "configmap/settings", "-p", &patch]);
        assert!(output.status.success());
        let done = Instant::now();
        let (mut detected, mut healed, mut seen_drift) = (None, None, false);
        while detected.is_none() || healed.is_none() {
            tokio::select! {
                Some(Ok(config)) = config_events.next() => {
                    let greeting = config.data.unwrap_or_default().get("greeting").cloned();
                    if greeting.as_deref() == Some(value.as_str()) {
                        seen_drift = true;
                    } else if seen_drift && greeting.as_deref() == Some("hello") {
                        healed.get_or_insert(done.elapsed());
                    }
                }
                Some(Ok(app)) = app_events.next() => {
                    let recorded = app.status.as_ref().and_then(|s| s.last_drift.first()).is_some_and(|e| {
                        e.record.fields.first().and_then(|f| f.live.as_ref()) == Some(&json!(value))
                    });
                    if recorded {
                        detected.get_or_insert(done.elapsed());
                    }
                }
                () = tokio::time::sleep(Duration::from_secs(30)) => panic!("change {change} not healed in 30 s"),
            }
        }
        detect.push(detected.unwrap());
        heal.push(healed.unwrap());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = request_counts(&ns).await;

    println!("\n{CHANGES} kubectl patch changes of a ConfigMap value, self-heal on:");
    println!(
        "  detection (kubectl done → drift record in status): {}",
        percentiles(&mut detect)
    );
    println!(
        "  self-heal (kubectl done → live value reverted):    {}",
        percentiles(&mut heal)
    );
    println!(
        "\nAPI requests during the run, per change (all clients; kubectl's own patch included):"
    );
    for (key, count) in &after {
        let delta = count - before.get(key).copied().unwrap_or(0.0);
        if delta > 0.0 {
            println!("  {:>6.2}  {key}", delta / CHANGES as f64);
        }
    }
}

fn percentiles(samples: &mut [Duration]) -> String {
    samples.sort();
    let at = |p: f64| samples[((samples.len() as f64 * p).ceil() as usize).saturating_sub(1)];
    format!(
        "p50 {:>4} ms  p99 {:>4} ms  max {:>4} ms",
        at(0.50).as_millis(),
        at(0.99).as_millis(),
        samples.last().unwrap().as_millis()
    )
}

/// `apiserver_request_total` by verb, resource, subresource and dry-run.
async fn request_counts(ns: &TestNamespace) -> BTreeMap<String, f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = ns.client.request_text(request).await.unwrap();
    let mut counts = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let (labels, value) = line.rsplit_once(' ').unwrap();
        let label = |name: &str| {
            labels
                .split(&format!("{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or("")
                .to_string()
        };
        let key = format!(
            "{:<7} {}{}{}",
            label("verb"),
            label("resource"),
            match label("subresource").as_str() {
                "" => String::new(),
                sub => format!("/{sub}"),
            },
            match label("dry_run").as_str() {
                "" => String::new(),
                dry => format!(" (dryRun={dry})"),
            }
        );
        *counts.entry(key).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    counts
}
