//! `tether run --http-addr` serves `/metrics` as a Prometheus scrapes it:
//! only to a bearer token the API server vouches for and allows `get` on
//! `/metrics` (the ClusterRole `tether-metrics-reader`), with one
//! `tether_app_info` series per Application from the leader alone, and
//! every API request the controller makes counted by verb and resource.

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::metrics::{answered, installed, run_serving, scrape, series, service_account_token};
use support::{Running, app_dir, create_app, many_apps_repo, settings_repo};
use tether_controller::api::Application;
use tether_testkit::{application, eventually, free_port};

/// The sync and health of every Application of `apps` by name, once all
/// of them are reconciled.
async fn statuses_of(apps: &Api<Application>) -> Option<BTreeMap<String, (String, String)>> {
    let listed = apps.list(&ListParams::default()).await.ok()?;
    let count = listed.items.len();
    let statuses: BTreeMap<String, (String, String)> = listed
        .items
        .into_iter()
        .filter_map(|app| {
            let status = app.status?;
            status.reconciled_at.as_ref()?;
            let sync = status.sync.status.as_str().to_string();
            let health = status.health.status.as_str().to_string();
            Some((app.metadata.name?, (sync, health)))
        })
        .collect();
    (statuses.len() == count).then_some(statuses)
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_are_served_only_to_a_token_the_api_server_allows_to_get_them() {
    let (ns, reader) = installed("metrics-access").await;
    let stranger = service_account_token(&ns, "stranger");
    let port = free_port();
    let _controller = run_serving(&ns, "metrics", port);

    // No token, or one the API server does not know: 401, and nothing.
    let anonymous = answered(port, None).await;
    assert_eq!(anonymous.code, 401, "{}", anonymous.body);
    assert!(!anonymous.body.contains("tether_"), "{}", anonymous.body);
    let forged = scrape(port, Some("not-a-token")).unwrap();
    assert_eq!(forged.code, 401, "{}", forged.body);
    // A real user without the right: 403, and nothing.
    let refused = scrape(port, Some(&stranger)).unwrap();
    assert_eq!(refused.code, 403, "{}", refused.body);
    assert!(!refused.body.contains("tether_"), "{}", refused.body);
    // Bound to tether-metrics-reader: the exposition.
    let allowed = scrape(port, Some(&reader)).unwrap();
    assert_eq!(allowed.code, 200, "{}", allowed.body);
    assert!(
        allowed
            .content_type
            .starts_with("application/openmetrics-text"),
        "{}",
        allowed.content_type
    );
    assert!(
        allowed.body.contains("# TYPE tether_leader gauge"),
        "{}",
        allowed.body
    );
    assert!(allowed.body.ends_with("# EOF\n"), "{}", allowed.body);
    // The token never shows up in what the controller says.
    assert!(!allowed.body.contains(&reader));
}

#[tokio::test(flavor = "multi_thread")]
async fn with_200_apps_metrics_has_one_info_series_per_app_with_its_sync_and_health_in_under_100_ms()
 {
    const APPS: usize = 200;
    const MANUAL: usize = 40;
    let (ns, token) = installed("metrics-200").await;
    // One directory per app; the last MANUAL apps do not sync themselves.
    let repo = many_apps_repo(APPS);
    let items: Vec<Value> = (0..APPS)
        .map(|n| {
            let automated = n < APPS - MANUAL;
            application(&format!("app-{n}"), &ns.name, &repo.url(), &app_dir(n))
                .sync_policy(json!({"automated": automated}))
                .manifest()
                .clone()
        })
        .collect();
    let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &list.to_string());
    let port = free_port();
    let _controller = run_serving(&ns, "metrics", port);

    // Every app reconciled: its status says where it stands.
    let apps: Api<Application> = ns.api();
    eventually("200 apps reconciled, the automated ones synced", || async {
        let statuses = statuses_of(&apps).await?;
        let synced = statuses.values().filter(|(sync, _)| sync == "Synced");
        (statuses.len() == APPS && synced.count() == APPS - MANUAL).then_some(())
    })
    .await;

    // /metrics has exactly one tether_app_info per app, with its status
    // (as the API server has it at the same moment).
    let last = std::sync::Mutex::new(String::new());
    eventually("tether_app_info as the statuses say", || {
        let (apps, token, last) = (apps.clone(), token.clone(), &last);
        async move {
            let answer = scrape(port, Some(&token)).ok()?;
            let statuses = statuses_of(&apps).await?;
            let info = series(&answer.body, "tether_app_info");
            let reported: BTreeMap<String, (String, String)> = info
                .iter()
                .map(|(labels, _)| {
                    let label = |name: &str| labels.get(name).cloned().unwrap_or_default();
                    (label("name"), (label("sync"), label("health")))
                })
                .collect();
            if info.len() == APPS && reported == statuses {
                return Some(());
            }
            // Said once per change, shown if this times out.
            let differing: Vec<String> = statuses
                .iter()
                .filter(|(name, status)| reported.get(*name) != Some(status))
                .take(3)
                .map(|(name, status)| {
                    format!("{name}: {status:?}, reported {:?}", reported.get(name))
                })
                .collect();
            let now = format!(
                "{} {} series; differing: {differing:?}",
                answer.code,
                info.len()
            );
            let mut last = last.lock().unwrap();
            if now != *last {
                eprintln!("{now}");
                *last = now;
            }
            None
        }
    })
    .await;
    let answer = scrape(port, Some(&token)).unwrap();
    let info = series(&answer.body, "tether_app_info");
    assert_eq!(info.len(), APPS);
    assert!(info.iter().all(|(labels, value)| {
        *value == 1.0 && labels["namespace"] == ns.name && labels.contains_key("revision")
    }));
    for gauge in [
        "tether_app_not_synced_seconds",
        "tether_app_not_synced_too_long",
        "tether_break_glass_open",
    ] {
        assert_eq!(series(&answer.body, gauge).len(), APPS, "{gauge}");
    }

    // Answered fast: the median of 10 scrapes after a warm-up.
    for _ in 0..3 {
        assert_eq!(scrape(port, Some(&token)).unwrap().code, 200);
    }
    let mut took: Vec<Duration> = (0..10)
        .map(|_| {
            let started = Instant::now();
            let answer = scrape(port, Some(&token)).unwrap();
            assert_eq!(answer.code, 200);
            started.elapsed()
        })
        .collect();
    took.sort();
    let median = (took[4] + took[5]) / 2;
    println!(
        "/metrics with {APPS} apps: median {:.1} ms of 10 (min {:.1}, max {:.1}), {} bytes",
        median.as_secs_f64() * 1000.0,
        took[0].as_secs_f64() * 1000.0,
        took[9].as_secs_f64() * 1000.0,
        answer.body.len()
    );
    assert!(median < Duration::from_millis(100), "median {median:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn of_two_replicas_only_the_leader_reports_app_series() {
    let (ns, token) = installed("metrics-leader").await;
    let repo = settings_repo();
    create_app(&ns, &repo, json!({}));
    let ports = [("alpha", free_port()), ("beta", free_port())];
    let _replicas: Vec<Running> = ports
        .iter()
        .map(|(identity, port)| run_serving(&ns, identity, *port))
        .collect();
    let reported = |port: u16| {
        let token = token.clone();
        async move {
            let answer = scrape(port, Some(&token)).ok()?;
            (answer.code == 200).then_some(())?;
            let leader = series(&answer.body, "tether_leader").first()?.1;
            let apps = series(&answer.body, "tether_app_info").len();
            Some((leader, apps))
        }
    };
    // One leads and reports the app; the other reports no app at all.
    let (leader, follower) = eventually("one leader reporting the app", || async {
        let (alpha, beta) = (reported(ports[0].1).await?, reported(ports[1].1).await?);
        match (alpha, beta) {
            ((1.0, 1), (0.0, 0)) => Some(("alpha", "beta")),
            ((0.0, 0), (1.0, 1)) => Some(("beta", "alpha")),
            _ => None,
        }
    })
    .await;
    // And so it stays, scrape after scrape.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let port = |identity| ports.iter().find(|(i, _)| *i == identity).unwrap().1;
        assert_eq!(reported(port(leader)).await, Some((1.0, 1)));
        assert_eq!(reported(port(follower)).await, Some((0.0, 0)));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_api_request_the_controller_makes_is_counted_by_verb_resource_and_code() {
    let (ns, token) = installed("metrics-requests").await;
    let repo = settings_repo();
    create_app(&ns, &repo, json!({}));
    let port = free_port();
    let _controller = run_serving(&ns, "metrics", port);
    let apps: Api<Application> = ns.api();
    tether_testkit::status_where(&apps, "Synced", |s| s.sync.status.as_str() == "Synced").await;

    let answer = scrape(port, Some(&token)).unwrap();
    let requests = series(&answer.body, "tether_kube_requests_total");
    let count = |verb: &str, resource: &str| -> f64 {
        requests
            .iter()
            .filter(|(labels, _)| labels["verb"] == verb && labels["resource"] == resource)
            .map(|(_, value)| value)
            .sum()
    };
    let listed: Vec<String> = requests
        .iter()
        .map(|(labels, value)| {
            format!(
                "{} {} {} {value}",
                labels["verb"], labels["resource"], labels["code"]
            )
        })
        .collect();
    // The Application watch, the sync's server-side apply, and the
    // reviews of the scraper's token.
    for (verb, resource) in [
        ("list", "applications"),
        ("watch", "applications"),
        ("patch", "configmaps"),
        ("create", "tokenreviews"),
        ("create", "subjectaccessreviews"),
    ] {
        assert!(
            count(verb, resource) >= 1.0,
            "{verb} {resource}: {listed:#?}"
        );
    }
    // The lease and the app's status, however they are written.
    for resource in ["leases", "applications/status"] {
        let written =
            count("create", resource) + count("update", resource) + count("patch", resource);
        assert!(written >= 1.0, "{resource}: {listed:#?}");
    }
    // Codes are HTTP status codes; verbs the audit log's.
    let verbs = [
        "get",
        "list",
        "watch",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
    ];
    for (labels, _) in &requests {
        assert!(labels["code"].parse::<u16>().is_ok(), "{listed:#?}");
        assert!(verbs.contains(&labels["verb"].as_str()), "{listed:#?}");
    }
    // Nothing is per object: no series names the ConfigMap.
    let samples: Vec<&str> = answer
        .body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert!(
        samples.iter().all(|l| !l.contains("settings")),
        "{samples:#?}"
    );
}
