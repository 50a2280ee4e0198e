//! Shared by the controller's integration tests: a real Git repository
//! (file://), the controller started in-process for one namespace, and
//! waiting for an Application's status.
//!
//! Each test binary compiles this module on its own and uses only part of
//! it, so unused items are expected here.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tether_controller::api::{Application, ApplicationStatus};
use tether_controller::{Config, install};
use tether_testkit::TestNamespace;

pub use tether_testkit::{PATIENCE, Repo, eventually};

pub mod break_glass;

/// The configuration `tether run --watch-namespace` would use for `ns`,
/// with a 2 s safety-net resync.
pub fn web(replicas: u32, greeting: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "app/config.yaml",
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  greeting: \"{greeting}\"\n"
            ),
        ),
        (
            "app/web.yaml",
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n"
            ),
        ),
    ]
}

pub fn config_for(ns: &TestNamespace, cache: &Path) -> Config {
    Config {
        resync: Duration::from_secs(2),
        cache_dir: cache.to_path_buf(),
        lease_namespace: ns.name.clone(),
        identity: format!("test-{}", ns.name),
        watch_namespace: Some(ns.name.clone()),
        ..Config::default()
    }
}

/// Starts a controller for `ns` only, as `tether run --watch-namespace` would.
pub async fn start_controller(ns: &TestNamespace, cache: &Path) {
    start_controller_with(ns, config_for(ns, cache)).await;
}

/// Installs Tether into `ns` and starts a controller with `config`.
pub async fn start_controller_with(ns: &TestNamespace, config: Config) {
    tether_testkit::log_file();
    install::install(ns.client.clone(), &ns.name).await.unwrap();
    let client = ns.client.clone();
    tokio::spawn(async move {
        if let Err(error) = tether_controller::run(client, config).await {
            panic!("controller stopped: {error}");
        }
    });
}

/// Creates Application `shop` for the `app/` directory of `repo`.
pub async fn create_app(ns: &TestNamespace, repo: &Repo) -> Api<Application> {
    create_app_with(ns, repo, json!({})).await
}

/// Creates Application `shop` for `repo`'s `app/` with `sync_policy`.
pub async fn create_app_with(
    ns: &TestNamespace,
    repo: &Repo,
    sync_policy: Value,
) -> Api<Application> {
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &ns.name);
    let app = json!({"apiVersion": "tether.dev/v1alpha1", "kind": "Application",
        "metadata": {"name": "shop", "namespace": ns.name},
        "spec": {"source": {"repoURL": repo.url(), "path": "app"},
                 "destination": {"namespace": ns.name},
                 "syncPolicy": sync_policy}});
    apps.patch("shop", &PatchParams::apply("test"), &Patch::Apply(&app))
        .await
        .unwrap();
    apps
}

pub async fn status_where(
    apps: &Api<Application>,
    what: &str,
    check: impl Fn(&ApplicationStatus) -> bool,
) -> ApplicationStatus {
    let last = std::sync::Mutex::new(None);
    let found = tokio::time::timeout(
        PATIENCE,
        eventually(what, || async {
            let status = apps.get("shop").await.ok()?.status?;
            let matched = check(&status);
            *last.lock().unwrap() = Some(status.clone());
            matched.then_some(status)
        }),
    )
    .await;
    match found {
        Ok(status) => status,
        Err(_) => panic!(
            "timed out waiting for {what}; last status: {}\nthe controller's last log lines:\n{}",
            serde_json::to_string_pretty(&*last.lock().unwrap()).unwrap(),
            tether_testkit::log_tail("", 40)
        ),
    }
}

/// `spec.replicas` of Deployment `web` in `ns`, as the API server has it.
pub async fn replicas(ns: &TestNamespace) -> i32 {
    Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(ns.client.clone(), &ns.name)
        .get("web")
        .await
        .unwrap()
        .spec
        .unwrap()
        .replicas
        .unwrap()
}
