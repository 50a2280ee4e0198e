//! Several sources in one Application, run by `tether run`: a chart from a
//! real OCI registry with its values from Git (`$values/…`). A push to the
//! values file is shown by `tether diff` and, through a signed GitHub
//! webhook, synced; `tether status` names each source's resolved revision.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use tether_controller::api::Application;
use tether_testkit::charts::{Chart, Registry};
use tether_testkit::{Repo, eventually, free_port, status_of};

use support::{installed, run_controller_with, tether, tether_ok, text};

const SECRET: &str = "webhook-s3cret";

async fn greeting(ns: &tether_testkit::TestNamespace) -> Option<String> {
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let found = config_maps.get_opt("web-web").await.ok()??;
    found.data?.get("greeting").cloned()
}

#[tokio::test]
async fn a_registry_chart_with_values_from_git_follows_a_pushed_value_through_the_webhook() {
    let registry = Registry::start(None);
    registry.push(&Chart::new("web", "1.0.0"), "charts");
    let values = Repo::new();
    values.commit(
        &[("envs/prod/values.yaml", "greeting: from-git\n")],
        "prod values",
    );
    let ns = installed("sources").await;
    let secret_file = ns.cache_dir().join("webhook-secret");
    std::fs::create_dir_all(ns.cache_dir()).unwrap();
    std::fs::write(&secret_file, SECRET).unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    // A resync far away and no poll interval: only the webhook moves it.
    let _controller = run_controller_with(
        &ns,
        &ns,
        "sources",
        300,
        &[
            "--http-addr",
            &addr.to_string(),
            "--webhook-secret-file",
            secret_file.to_str().unwrap(),
            "--poll-interval",
            "1h",
        ],
    );
    let app = json!({"apiVersion": "tether.dev/v1alpha1", "kind": "Application",
        "metadata": {"name": "web", "namespace": ns.name},
        "spec": {
            "sources": [
                {"repoURL": registry.url("charts"), "chart": "web", "version": "1.0.x", "insecure": true,
                 "renderer": {"helm": {"valueFiles": ["$values/envs/prod/values.yaml"]}}},
                {"repoURL": values.url(), "ref": "values"}],
            "destination": {"namespace": ns.name},
            "syncPolicy": {"automated": true}}});
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &app.to_string());
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &ns.name);
    let status = status_of(&apps, "web", "Synced", |s| s.sync.status == "Synced").await;
    assert_eq!(greeting(&ns).await.as_deref(), Some("from-git"));
    let revisions: Vec<&str> = status
        .sync
        .sources
        .iter()
        .map(|s| s.revision.as_str())
        .collect();
    assert_eq!(revisions, ["1.0.0", values.head().as_str()]);
    assert!(status.sync.sources[0].digest.starts_with("sha256:"));

    let shown = tether_ok(&ns, &["status", "web", "-n", &ns.name]);
    assert!(shown.contains("Source values"), "{shown}");
    assert!(
        shown.contains("Chart") && shown.contains("1.0.x"),
        "{shown}"
    );
    assert!(
        shown.contains(&values.head()),
        "the values source's commit: {shown}"
    );
    assert!(
        shown.contains("1.0.0 (sha256:"),
        "the chart's version and digest: {shown}"
    );

    // Let the reconciles that follow a sync (its own objects' events) end,
    // so that nothing but the webhook fetches again.
    let mut last = None;
    loop {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let now = apps.get("web").await.unwrap().status.unwrap().reconciled_at;
        if now == last {
            break;
        }
        last = now;
    }
    // A push the controller has not heard of: tether diff renders it.
    values.commit(
        &[("envs/prod/values.yaml", "greeting: pushed\n")],
        "new greeting",
    );
    let output = tether(&ns, &["diff", "web", "-n", &ns.name]);
    let diff = text(&output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "differences found: {diff}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        diff.contains("ConfigMap") && diff.contains("web-web"),
        "{diff}"
    );
    assert!(diff.contains("pushed"), "{diff}");
    assert_eq!(
        greeting(&ns).await.as_deref(),
        Some("from-git"),
        "diff changes nothing"
    );

    // The webhook wakes it.
    let sent = Instant::now();
    let status = tether_testkit::webhook::post_github_push(
        addr,
        SECRET,
        &values.url(),
        Some([vec![], vec!["envs/prod/values.yaml".into()], vec![]]),
    )
    .unwrap();
    assert_eq!(status / 100, 2, "webhook answered {status}");
    eventually("the pushed value synced", || async {
        (greeting(&ns).await.as_deref() == Some("pushed")).then_some(())
    })
    .await;
    let took = sent.elapsed();
    println!("values push → webhook → synced: {took:.1?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn tether_render_renders_a_chart_from_a_helm_repository_without_a_cluster() {
    let repo = tether_testkit::charts::ChartRepo::start(None);
    repo.publish(&Chart::new("web", "1.2.3"));
    repo.publish(&Chart::new("web", "1.3.0"));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tether"))
        .args([
            "render",
            "--repo",
            &repo.url(),
            "--chart",
            "web",
            "--version",
            "1.2.x",
        ])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{shown}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(shown.contains("name: web-web"), "{shown}");
    assert!(
        shown.contains("version: \"1.2.3\"") || shown.contains("version: 1.2.3"),
        "{shown}"
    );
}
