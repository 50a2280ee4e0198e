//! The monitoring that ships with Tether (`deploy/monitoring/`): the alert
//! rules pass `promtool`, every alert has a unit test that sees it fire,
//! the rules and the Grafana dashboard read only metrics the controller
//! exports, and the test kit's real Prometheus scrapes with a token and
//! fires an alert.

#[path = "monitoring/promql.rs"]
mod promql;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tether_controller::metrics::{Metrics, NAMES};
use tether_testkit::prometheus::{AlertState, Prometheus, Target};
use tether_testkit::repo_root;

fn monitoring() -> PathBuf {
    repo_root().join("deploy/monitoring")
}

fn rules_file() -> PathBuf {
    monitoring().join("tether-rules.yaml")
}

/// Every rule of every group in the shipped rules file.
fn rules() -> Vec<Value> {
    let text = std::fs::read_to_string(rules_file()).expect("the rules file");
    let file: Value = serde_saphyr::from_str(&text).expect("the rules file is YAML");
    let groups = file["groups"].as_array().expect("groups").clone();
    groups
        .iter()
        .flat_map(|group| group["rules"].as_array().expect("rules").clone())
        .collect()
}

fn unit_test_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(monitoring().join("tests"))
        .expect("deploy/monitoring/tests")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no promtool unit tests");
    files
}

/// Runs promtool, which must succeed; its whole output otherwise.
fn promtool(args: &[&str], files: &[PathBuf]) -> String {
    let output = Command::new("promtool")
        .args(args)
        .args(files)
        .output()
        .expect("promtool runs (scripts/setup.sh installs Debian's prometheus package)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "promtool {args:?}:\n{text}");
    text
}

/// Histograms are exported as `NAME_bucket`, `NAME_sum` and `NAME_count`;
/// which names are histograms, the controller's own exposition says.
fn histograms() -> BTreeSet<String> {
    Metrics::new()
        .encode()
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|line| line.strip_suffix(" histogram"))
        .map(str::to_string)
        .collect()
}

/// The metrics `expr` reads that Tether does not export (Prometheus' own
/// `up` is allowed).
fn unknown_metrics(expr: &str, histograms: &BTreeSet<String>) -> Vec<String> {
    let exported = |name: &str| {
        name == "up"
            || NAMES.contains(&name)
            || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
                name.strip_suffix(suffix)
                    .is_some_and(|base| NAMES.contains(&base) && histograms.contains(base))
            })
    };
    promql::metric_names(expr)
        .into_iter()
        .filter(|name| !exported(name))
        .collect()
}

/// Every PromQL expression of a dashboard, named by panel title: panel
/// targets (rows' nested panels too) and the metric of `label_values(…)`
/// variables.
fn dashboard_expressions(dashboard: &Value) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut panels: Vec<&Value> = dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    while let Some(panel) = panels.pop() {
        panels.extend(panel["panels"].as_array().into_iter().flatten());
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_default();
            let title = panel["title"].as_str().unwrap_or_default();
            found.push((format!("panel {title:?}"), expr.to_string()));
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let query = match &variable["query"] {
            Value::Object(query) => query["query"].as_str().unwrap_or_default(),
            query => query.as_str().unwrap_or_default(),
        };
        if let Some(args) = query.strip_prefix("label_values(") {
            let selector = args
                .rsplit_once(',')
                .map_or("", |(selector, _label)| selector);
            let name = variable["name"].as_str().unwrap_or_default();
            found.push((format!("variable {name:?}"), selector.to_string()));
        }
    }
    found
}

/// Each expression reading a metric Tether does not export, as `WHERE:
/// NAME`.
fn offenders(expressions: &[(String, String)]) -> Vec<String> {
    let histograms = histograms();
    expressions
        .iter()
        .flat_map(|(place, expr)| {
            unknown_metrics(expr, &histograms)
                .into_iter()
                .map(move |name| format!("{place}: {name}"))
        })
        .collect()
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(monitoring().join("grafana-dashboard.json"))
        .expect("the dashboard");
    serde_json::from_str(&text).expect("the dashboard is JSON")
}

#[test]
fn the_alert_rules_pass_promtool_check() {
    let output = promtool(&["check", "rules"], &[rules_file()]);
    assert!(output.contains("SUCCESS"), "{output}");
}

#[test]
fn the_alert_rules_pass_their_promtool_unit_tests() {
    promtool(&["test", "rules"], &unit_test_files());
}

#[test]
fn every_alert_has_a_severity_a_runbook_line_and_a_unit_test_that_sees_it_fire() {
    let mut fired = BTreeSet::new();
    for file in unit_test_files() {
        let text = std::fs::read_to_string(&file).expect("a unit test file");
        let tests: Value = serde_saphyr::from_str(&text).expect("a unit test file is YAML");
        for test in tests["tests"].as_array().expect("tests") {
            for case in test["alert_rule_test"].as_array().into_iter().flatten() {
                if case["exp_alerts"]
                    .as_array()
                    .is_some_and(|alerts| !alerts.is_empty())
                {
                    fired.insert(case["alertname"].as_str().expect("alertname").to_string());
                }
            }
        }
    }
    let alerts: BTreeSet<String> = rules()
        .iter()
        .map(|rule| {
            let name = rule["alert"]
                .as_str()
                .expect("only alerting rules")
                .to_string();
            assert!(
                ["critical", "warning", "info"]
                    .contains(&rule["labels"]["severity"].as_str().unwrap_or("")),
                "{name} has no severity"
            );
            for annotation in ["summary", "description"] {
                assert!(
                    rule["annotations"][annotation].is_string(),
                    "{name} has no {annotation}"
                );
            }
            name
        })
        .collect();
    for required in [
        "TetherAppNotSyncedTooLong",
        "TetherAppDegraded",
        "TetherSelfHealFighting",
        "TetherBreakGlassOpen",
        "TetherControllerDown",
    ] {
        assert!(alerts.contains(required), "{required} is missing");
    }
    let untested: Vec<&String> = alerts.difference(&fired).collect();
    assert!(
        untested.is_empty(),
        "no unit test sees these fire: {untested:?}"
    );
}

#[test]
fn the_alert_rules_read_only_metrics_tether_exports() {
    let expressions: Vec<(String, String)> = rules()
        .iter()
        .map(|rule| {
            let expr = rule["expr"].as_str().expect("expr").to_string();
            (
                format!("rule {}", rule["alert"].as_str().unwrap_or_default()),
                expr,
            )
        })
        .collect();
    assert_eq!(offenders(&expressions), Vec::<String>::new());
}

#[test]
fn the_dashboard_is_grafana_json_whose_panels_read_only_metrics_tether_exports() {
    let dashboard = dashboard();
    assert_eq!(dashboard["schemaVersion"], 39);
    let variables: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
        .iter()
        .map(|variable| variable["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(variables, ["datasource", "namespace", "app"]);
    let expressions = dashboard_expressions(&dashboard);
    assert!(expressions.len() > 20, "{expressions:?}");
    for (place, expr) in &expressions {
        assert!(!expr.trim().is_empty(), "{place} has no expression");
    }
    assert_eq!(offenders(&expressions), Vec::<String>::new());
}

#[test]
fn the_checker_rejects_a_metric_tether_does_not_export() {
    let mut dashboard = dashboard();
    dashboard["panels"][0]["panels"] = json!([{
        "title": "Resyncs",
        "targets": [{ "expr": r#"sum by (namespace) (rate(tether_app_resyncs_total{name="x"}[5m]))"# }],
    }]);
    dashboard["templating"]["list"][1]["query"]["query"] =
        json!("label_values(tether_apps, namespace)");
    let mut expressions = dashboard_expressions(&dashboard);
    expressions.push((
        "rule NotAHistogram".into(),
        "tether_app_not_synced_seconds_count > 0".into(),
    ));
    expressions.push(("rule Sneaky".into(), "up and on (job) tether_up".into()));
    assert_eq!(
        offenders(&expressions),
        [
            r#"panel "Resyncs": tether_app_resyncs_total"#,
            r#"variable "namespace": tether_apps"#,
            "rule NotAHistogram: tether_app_not_synced_seconds_count",
            "rule Sneaky: tether_up",
        ]
    );
}

/// Serves a one-line `/metrics` on a loopback port to requests that carry
/// `token`, and 401 to the others.
fn exporter(token: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = listener.local_addr().expect("an address").to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            answer(stream, token);
        }
    });
    address
}

fn answer(stream: TcpStream, token: &str) {
    let mut reader = BufReader::new(&stream);
    let mut authorized = false;
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|read| read > 0) && line.trim() != "" {
        let (name, value) = line.split_once(':').unwrap_or_default();
        authorized |=
            name.eq_ignore_ascii_case("authorization") && value.trim() == format!("Bearer {token}");
        line.clear();
    }
    let (status, body) = match authorized {
        true => ("200 OK", "# TYPE tether_leader gauge\ntether_leader 1\n"),
        false => ("401 Unauthorized", ""),
    };
    let _ = write!(
        &stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("writing a file");
    path
}

#[tokio::test]
async fn the_test_kits_prometheus_scrapes_with_a_token_and_fires_an_alert() {
    let token = "s3cret-scrape-token";
    let address = exporter(token);
    let dir = tempfile::tempdir().expect("a directory");
    let rules = write(
        dir.path(),
        "rules.yaml",
        "groups:\n- name: test\n  rules:\n  - alert: Scraped\n    expr: up == 1\n    for: 1s\n",
    );
    let targets = [
        Target {
            job: "tether".into(),
            address: address.clone(),
            bearer_token: Some(token.into()),
        },
        Target {
            job: "stranger".into(),
            address,
            bearer_token: Some("wrong".into()),
        },
    ];
    let started = Instant::now();
    let prometheus = Prometheus::start(&targets, &[rules], Duration::from_millis(500)).await;

    // Scraped with the right token only.
    let alert = prometheus
        .wait_for_alert("Scraped", AlertState::Firing, Duration::from_secs(10))
        .await;
    assert_eq!(alert.labels["job"], "tether");
    let leader = prometheus.query(r#"tether_leader{job="tether"}"#).await;
    assert_eq!(leader[0]["value"][1], "1", "{leader}");
    let up = prometheus.query(r#"up{job="stranger"}"#).await;
    assert_eq!(up[0]["value"][1], "0", "{up}");
    assert!(
        prometheus
            .alerts()
            .await
            .iter()
            .all(|alert| alert.labels["job"] == "tether")
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        !prometheus.log().contains(token),
        "the token is in Prometheus' log"
    );

    // Stopped when dropped.
    let port = prometheus
        .url()
        .rsplit_once(':')
        .expect("a port")
        .1
        .parse::<u16>()
        .expect("a port");
    drop(prometheus);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "Prometheus still listens"
    );
}

/// Grafana's variables, as a query would have them.
fn substitute_variables(expr: &str) -> String {
    expr.replace("$__rate_interval", "1m")
        .replace("$__range", "1h")
        .replace("$namespace", ".*")
        .replace("$app", ".*")
}

#[tokio::test]
async fn prometheus_loads_the_rules_and_accepts_every_dashboard_expression() {
    let prometheus = Prometheus::start(&[], &[rules_file()], Duration::from_secs(1)).await;
    for (place, expr) in dashboard_expressions(&dashboard()) {
        if place.starts_with("variable") {
            continue;
        }
        // query() fails the test with Prometheus' parse error.
        prometheus.query(&substitute_variables(&expr)).await;
    }
}
