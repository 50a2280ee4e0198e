//! Charts from a Helm repository and an OCI registry, reconciled by the
//! controller: a version range follows new patches on the next poll (and
//! never the next minor), polling costs one conditional index read per
//! interval with no download and no reconcile, and a failure names the
//! source with nothing applied.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use tether_controller::Config;
use tether_controller::api::Application;
use tether_testkit::charts::{Chart, ChartRepo, Registry};
use tether_testkit::{AppFixture, TestNamespace, application, eventually, status_of};

use support::{config_for, start_controller_with};

/// A controller whose resync is far away: only polls move chart apps.
async fn started(prefix: &str) -> TestNamespace {
    let ns = TestNamespace::create(prefix).await;
    let mut config = Config {
        resync: Duration::from_secs(300),
        ..config_for(&ns)
    };
    config.sandbox.tool_dirs = tether_testkit::tools::tool_dirs();
    start_controller_with(&ns, config).await;
    ns
}

async fn chart_version(ns: &TestNamespace, name: &str) -> Option<String> {
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let found = config_maps.get_opt(name).await.ok()??;
    found.data?.get("version").cloned()
}

/// Application `web` in `ns` for chart web `version` (or range) of the
/// chart repository or registry at `url`, automated.
fn web_chart(ns: &TestNamespace, url: &str, version: &str) -> AppFixture {
    application("web", &ns.name, url, "")
        .chart("web", version)
        .sync_policy(serde_json::json!({"automated": true}))
}

/// A chart repository publishing chart web `published`, a namespace with
/// a controller, and Application `web` there for chart web `version`
/// (or range), polled every `interval`.
async fn polled_web_chart(
    prefix: &str,
    published: &str,
    version: &str,
    interval: &str,
) -> (ChartRepo, TestNamespace, Api<Application>) {
    let repo = ChartRepo::start(None);
    repo.publish(&Chart::new("web", published));
    let ns = started(prefix).await;
    let apps = web_chart(&ns, &repo.url(), version)
        .interval(interval)
        .apply(&ns.client)
        .await;
    (repo, ns, apps)
}

/// Application `web` for chart web 1.0.0 of `registry`, automated, once a
/// condition's message contains `failure`; and that message.
async fn failing_web_chart(
    ns: &TestNamespace,
    registry: &Registry,
    failure: &str,
) -> (Api<Application>, String) {
    let apps = web_chart(ns, &registry.url("charts"), "1.0.0")
        .apply(&ns.client)
        .await;
    let status = status_of(&apps, "web", failure, |s| {
        s.conditions.iter().any(|c| c.message.contains(failure))
    })
    .await;
    let message = status
        .conditions
        .into_iter()
        .find(|c| c.message.contains(failure))
        .expect("the condition waited for")
        .message;
    (apps, message)
}

#[tokio::test]
async fn a_chart_range_upgrades_to_a_new_patch_on_the_next_poll_but_not_to_the_next_minor() {
    let (repo, ns, apps) = polled_web_chart("chart-range", "1.2.3", "1.2.x", "2s").await;
    let status = status_of(&apps, "web", "Synced at 1.2.3", |s| {
        s.sync.revision.as_deref() == Some("1.2.3") && s.sync.status == "Synced"
    })
    .await;
    assert!(
        status
            .sync
            .compared_to
            .unwrap_or_default()
            .contains("sha256:")
    );
    assert_eq!(
        chart_version(&ns, "web-web").await.as_deref(),
        Some("1.2.3")
    );

    repo.publish(&Chart::new("web", "1.2.4"));
    eventually("1.2.4 applied on a poll", || async {
        (chart_version(&ns, "web-web").await.as_deref() == Some("1.2.4")).then_some(())
    })
    .await;
    status_of(&apps, "web", "Synced at 1.2.4", |s| {
        s.sync.revision.as_deref() == Some("1.2.4")
    })
    .await;

    repo.publish(&Chart::new("web", "1.3.0"));
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        chart_version(&ns, "web-web").await.as_deref(),
        Some("1.2.4")
    );
}

#[tokio::test]
async fn a_steady_poll_is_one_304_per_interval_with_no_download_and_no_reconcile() {
    let (repo, _ns, apps) = polled_web_chart("chart-steady", "1.0.0", "", "3s").await;
    status_of(&apps, "web", "Synced", |s| s.sync.status == "Synced").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let reconciled = apps.get("web").await.unwrap().status.unwrap().reconciled_at;
    repo.take_requests();
    tokio::time::sleep(Duration::from_secs(15)).await;
    let requests = repo.take_requests();
    println!("15 s at a 3s interval: {requests:?}");
    let index_reads = requests
        .iter()
        .filter(|r| r.starts_with("GET /index.yaml"))
        .count();
    assert!(
        (4..=6).contains(&index_reads),
        "one index read per interval: {requests:?}"
    );
    assert_eq!(
        index_reads,
        requests.len(),
        "no archive downloaded: {requests:?}"
    );
    let after = apps.get("web").await.unwrap().status.unwrap().reconciled_at;
    assert_eq!(
        after, reconciled,
        "nothing published, so nothing reconciled or rendered"
    );
}

#[tokio::test]
async fn an_oci_chart_syncs_and_a_missing_login_is_a_condition_naming_the_source() {
    let registry = Registry::start(Some(("bot", "reg-pa55")));
    registry.push(&Chart::new("web", "1.0.0"), "charts");
    let ns = started("chart-oci").await;
    let (apps, message) = failing_web_chart(&ns, &registry, "authentication failed").await;
    assert!(message.contains("chart \"web\""), "{message}");
    assert!(
        message.contains(&format!("127.0.0.1:{}", registry.port)),
        "{message}"
    );
    assert_eq!(chart_version(&ns, "web-web").await, None, "nothing applied");

    // The login, as a labelled docker-config Secret.
    let config = format!(
        r#"{{"auths": {{"127.0.0.1:{}": {{"username": "bot", "password": "reg-pa55"}}}}}}"#,
        registry.port
    );
    ns.kubectl_ok_with_stdin(
        &["apply", "-f", "-"],
        &serde_json::json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "registry", "labels": {"tether.dev/secret-type": "repository"}},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": config}})
        .to_string(),
    );
    let patch = serde_json::json!({"spec": {"source": {"secretRef": {"name": "registry"}}}});
    apps.patch(
        "web",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(patch),
    )
    .await
    .unwrap();
    eventually("the chart applied with the login", || async {
        (chart_version(&ns, "web-web").await.as_deref() == Some("1.0.0")).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_chart_whose_registry_blob_does_not_match_its_digest_is_a_condition_and_nothing_is_applied()
 {
    let registry = Registry::start(None);
    registry.push(&Chart::new("web", "1.0.0"), "charts");
    // The chart layer's digest, then other bytes stored under it.
    let manifest: serde_json::Value = serde_json::from_str(&tether_testkit::run_ok(
        std::process::Command::new("curl").args([
            "-sS",
            "-H",
            "Accept: application/vnd.oci.image.manifest.v1+json",
            &format!(
                "http://127.0.0.1:{}/v2/charts/web/manifests/1.0.0",
                registry.port
            ),
        ]),
    ))
    .unwrap();
    let layer = manifest["layers"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(registry.blob_file(&layer), b"not the chart").unwrap();
    let ns = started("chart-mismatch").await;
    let (_, message) = failing_web_chart(&ns, &registry, "digest mismatch").await;
    assert!(
        message.contains("chart \"web\" (version 1.0.0)"),
        "{message}"
    );
    assert!(message.contains(&layer), "{message}");
    assert_eq!(chart_version(&ns, "web-web").await, None, "nothing applied");
}
