//! `tether dashboard` driven like a user would, against the real local
//! control plane and a real `tether run`: the overview counts and lists the
//! converged apps, a change reaches the browser as a server-sent event and
//! the page then shows the new state, no Secret value is ever served, and a
//! remote address or a forbidden cluster-wide list is refused clearly.

mod support;

use std::time::{Duration, Instant};

use kube::api::Api;
use serde_json::json;
use support::dashboard::{dashboard, get_without};
use support::{
    Repo, Running, config_map, error_text, installed, run_controller, tether, tether_as,
    tether_command, tether_ok,
};
use tether_controller::api::Application;
use tether_core::OperationalState;
use tether_testkit::{TestNamespace, application, free_port, status_of, write_script};

/// A value that must never leave the cluster through the dashboard.
const PLANTED: &str = "planted-secret-value-4d1f9c";

/// The headline entry of `state` with `count` apps, as the page writes it.
fn headline(count: usize, icon: &str, state: &str) -> String {
    format!(
        "<span class=\"count\">{count}</span> <span class=\"badge\"><span aria-hidden=\"true\">{icon}</span> {state}</span>"
    )
}

/// GET `url`'s body, which must not hold the planted Secret value.
async fn get(client: &reqwest::Client, url: &str) -> String {
    get_without(client, url, PLANTED).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_overview_follows_a_drift_within_two_seconds_and_never_shows_a_secret() {
    let ns = installed("dashboard").await;
    ns.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "planted",
        &format!("--from-literal=token={PLANTED}"),
    ]);
    let repo = Repo::new();
    repo.commit(
        &[
            ("alpha/settings.yaml", config_map("alpha-settings", "one")),
            ("beta/settings.yaml", config_map("beta-settings", "one")),
        ],
        "two apps",
    );
    for name in ["alpha", "beta"] {
        let app = application(name, &ns.name, &repo.url(), name)
            .sync_policy(json!({"automated": true, "selfHeal": false}));
        ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &app.manifest().to_string());
    }
    let _controller = run_controller(&ns, "dashboard");
    let apps: Api<Application> = ns.api();
    for name in ["alpha", "beta"] {
        status_of(&apps, name, "Converged", |s| {
            s.state == Some(OperationalState::Converged)
        })
        .await;
    }

    // The dashboard, as the namespace's kubeconfig.
    let (_dashboard, base) = dashboard(tether_command(&ns, &[]), &ns.name).await;
    let client = reqwest::Client::new();
    let page = get(&client, &format!("{base}/")).await;
    assert!(page.contains(&headline(2, "✔", "Converged")), "{page}");
    assert!(
        page.contains(&headline(0, "↻", "DriftedOrPending")),
        "{page}"
    );
    assert!(page.contains("Applications (2 of 2)"), "{page}");
    for name in ["alpha", "beta"] {
        assert!(
            page.contains(&format!("data-app=\"{}/{name}\"", ns.name)),
            "{page}"
        );
    }
    assert_eq!(get(&client, &format!("{base}/healthz")).await, "ok");
    for asset in [
        "/assets/dashboard.css",
        "/assets/live.js",
        "/live?q=planted",
    ] {
        get(&client, &format!("{base}{asset}")).await;
    }

    // A person edits alpha's ConfigMap; with self-heal off the drift stays.
    let mut events = client.get(format!("{base}/events")).send().await.unwrap();
    assert!(events.status().is_success());
    let edited = Instant::now();
    let deadline = edited + Duration::from_secs(2);
    ns.kubectl_ok(&[
        "patch",
        "configmap",
        "alpha-settings",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"greeting":"edited"}}"#,
    ]);
    let mut first_event = None;
    let shown = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let chunk = tokio::time::timeout(left, events.chunk())
            .await
            .expect("an event within 2 s of the edit")
            .unwrap()
            .expect("the event stream stays open");
        let chunk = String::from_utf8_lossy(&chunk).to_string();
        assert!(!chunk.contains(PLANTED));
        if !chunk.contains("event: change") {
            continue; // a keep-alive comment
        }
        first_event.get_or_insert_with(|| edited.elapsed());
        let live = get(&client, &format!("{base}/live?q=alpha")).await;
        if live.contains("DriftedOrPending</span></td>") {
            break live;
        }
    };
    println!(
        "first event {:?} after the edit; the page showed DriftedOrPending after {:?}",
        first_event.unwrap(),
        edited.elapsed()
    );
    assert!(shown.contains(">alpha</a></th>"), "{shown}");
    assert!(!shown.contains(">beta</a></th>"), "{shown}");
    let page = get(&client, &format!("{base}/")).await;
    assert!(page.contains(&headline(1, "✔", "Converged")), "{page}");
    assert!(
        page.contains(&headline(1, "↻", "DriftedOrPending")),
        "{page}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_remote_address_and_a_forbidden_cluster_wide_list_are_refused_clearly() {
    let ns = TestNamespace::create("dashboard-refused").await;
    let remote = tether(
        &ns,
        &["dashboard", "-n", &ns.name, "--address", "0.0.0.0:1"],
    );
    let said = error_text(&remote);
    assert!(
        said.contains("--address 0.0.0.0:1: not a loopback address"),
        "{said}"
    );
    assert!(said.contains("--allow-remote"), "{said}");

    let viewer = ns.user_with_roles(&format!("viewer-{}", ns.name), &["view"]);
    let port = free_port().to_string();
    let all = tether_as(
        &viewer,
        &["dashboard", "--address", &format!("127.0.0.1:{port}")],
    );
    let said = error_text(&all);
    assert!(
        said.contains("listing Applications in all namespaces is forbidden"),
        "{said}"
    );
    assert!(said.contains("pass -n NAMESPACE"), "{said}");
}

#[tokio::test(flavor = "multi_thread")]
async fn open_asks_the_desktop_to_open_the_dashboards_url() {
    let ns = TestNamespace::create("dashboard-open").await;
    tether_ok(&ns, &["install", "--crds-only"]);
    let desktop = tempfile::tempdir().unwrap();
    let opened = desktop.path().join("opened");
    write_script(
        desktop.path(),
        "xdg-open",
        &format!("#!/bin/sh\necho \"$1\" > {}\n", opened.display()),
    );
    let port = free_port();
    let mut command = tether_command(
        &ns,
        &[
            "dashboard",
            "-n",
            &ns.name,
            "--address",
            &format!("127.0.0.1:{port}"),
            "--open",
        ],
    );
    let path = std::env::var("PATH").unwrap_or_default();
    command.env("PATH", format!("{}:{path}", desktop.path().display()));
    let _dashboard = Running::spawn(command);
    // The shell creates the file before it writes the line: wait for the
    // whole line.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut url = String::new();
    while !url.ends_with('\n') && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        url = std::fs::read_to_string(&opened).unwrap_or_default();
    }
    assert_eq!(
        url.trim(),
        format!("http://127.0.0.1:{port}/"),
        "xdg-open was started"
    );
}
