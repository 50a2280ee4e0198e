//! `tether run --http-addr` serves `/metrics` as a Prometheus scrapes it:
//! only to a bearer token the API server vouches for and allows `get` on
//! `/metrics` (the ClusterRole `tether-metrics-reader`), with one
//! `tether_app_info` series per Application from the leader alone, and
//! every API request the controller makes counted by verb and resource.

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::{Repo, Running, config_map, create_app, tether_command, tether_ok};
use tether_controller::api::Application;
use tether_testkit::{TestNamespace, application, eventually, free_port};

/// `tether run` for `ns` as replica `identity`, serving HTTP on `port`.
fn run_serving(ns: &TestNamespace, identity: &str, port: u16) -> Running {
    let cache = ns.cache_dir().join(identity);
    let addr = format!("127.0.0.1:{port}");
    let mut running = Running::spawn(tether_command(
        ns,
        &[
            "run",
            "--lease-namespace",
            &ns.name,
            "--watch-namespace",
            &ns.name,
            "--identity",
            identity,
            "--resync-seconds",
            "30",
            "--cache-dir",
            cache.to_str().unwrap(),
            "--http-addr",
            &addr,
        ],
    ));
    running.leftovers.push(cache);
    running
}

/// What `GET /metrics` answered: the status code, the content type and
/// the body.
struct Answer {
    code: u16,
    content_type: String,
    body: String,
}

/// `GET /metrics` on loopback `port`, with `token` as bearer.
fn scrape(port: u16, token: Option<&str>) -> std::io::Result<Answer> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let authorization = token
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n{authorization}Connection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_default();
    let content_type = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    // The body may come chunked: the exposition's lines are all we read,
    // and chunk sizes are not among them.
    let body = dechunk(body);
    Ok(Answer {
        code,
        content_type,
        body,
    })
}

/// A chunked HTTP/1.1 body, joined (a body that is not chunked is kept).
fn dechunk(body: &str) -> String {
    let mut rest = body;
    let mut joined = String::new();
    loop {
        let Some((size, after)) = rest.split_once("\r\n") else {
            return body.to_string();
        };
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_string();
        };
        if size == 0 {
            return joined;
        }
        let Some(chunk) = after.get(..size) else {
            return body.to_string();
        };
        joined.push_str(chunk);
        rest = after[size..].trim_start_matches("\r\n");
    }
}

/// The controller's answer once it serves HTTP at all.
async fn answered(port: u16, token: Option<&str>) -> Answer {
    eventually("the controller serving HTTP", || async {
        scrape(port, token).ok()
    })
    .await
}

/// A ServiceAccount `name` in `ns` and a token for it.
fn service_account_token(ns: &TestNamespace, name: &str) -> String {
    ns.kubectl_ok(&["create", "serviceaccount", name]);
    ns.kubectl_ok(&["create", "token", name, "--duration", "1h"])
        .trim()
        .to_string()
}

/// Binds the ServiceAccount `name` of `ns` to `tether-metrics-reader`.
fn bind_metrics_reader(ns: &TestNamespace, name: &str) {
    ns.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        &format!("metrics-{}-{name}", ns.name),
        "--clusterrole",
        "tether-metrics-reader",
        "--serviceaccount",
        &format!("{}:{name}", ns.name),
    ]);
}

/// The series of `metric` in an exposition: labels by name, and the value.
fn series(body: &str, metric: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    body.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(metric)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(rest) => rest.rsplit_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            let labels = labels
                .split("\",")
                .filter(|pair| !pair.is_empty())
                .filter_map(|pair| {
                    let (name, value) = pair.split_once("=\"")?;
                    Some((name.to_string(), value.trim_end_matches('"').to_string()))
                })
                .collect();
            Some((labels, value.trim().parse().ok()?))
        })
        .collect()
}

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

/// A reader of `/metrics`: Tether installed in a new namespace, its
/// controller serving HTTP, and a ServiceAccount bound to
/// `tether-metrics-reader` with its token.
async fn installed(prefix: &str) -> (TestNamespace, String) {
    let ns = TestNamespace::create(prefix).await;
    tether_ok(&ns, &["install", "--namespace", &ns.name]);
    let token = service_account_token(&ns, "prometheus");
    bind_metrics_reader(&ns, "prometheus");
    (ns, token)
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
    let repo = Repo::new();
    let files: Vec<(String, String)> = (0..APPS)
        .map(|n| {
            (
                format!("apps/{n}/settings.yaml"),
                config_map(&format!("settings-{n}"), "hello"),
            )
        })
        .collect();
    repo.commit(&files, "200 apps");
    let items: Vec<Value> = (0..APPS)
        .map(|n| {
            let automated = n < APPS - MANUAL;
            application(
                &format!("app-{n}"),
                &ns.name,
                &repo.url(),
                &format!("apps/{n}"),
            )
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
    let repo = Repo::new();
    repo.commit(
        &[("app/settings.yaml", config_map("settings", "one"))],
        "one",
    );
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
    let repo = Repo::new();
    repo.commit(
        &[("app/settings.yaml", config_map("settings", "one"))],
        "one",
    );
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
