//! Shared by the controller's integration tests: a real Git repository
//! (file://), the controller started in-process for one namespace, and
//! waiting for an Application's status.
//!
//! Each test binary compiles this module on its own and uses only part of
//! it, so unused items are expected here.
#![allow(dead_code)]

use std::time::Duration;

use kube::api::Api;
use serde_json::{Value, json};
use tether_controller::api::{Application, ApplicationStatus};
use tether_controller::{Config, install};
use tether_testkit::{AppFixture, TestNamespace, application};
use tokio::task::JoinHandle;

pub use tether_testkit::{Repo, status_where};

pub mod break_glass;
pub mod waves;

/// `kubectl` arguments that change ConfigMap `settings`' greeting to
/// "hijacked" behind Git's back.
pub const HIJACK_GREETING: [&str; 4] = [
    "patch",
    "configmap/settings",
    "-p",
    r#"{"data":{"greeting":"hijacked"}}"#,
];

/// App `web`'s files: ConfigMap `settings` saying `greeting`, and
/// Deployment `web` with `replicas`.
pub fn web(replicas: u32, greeting: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "app/config.yaml",
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  greeting: \"{greeting}\"\n"
            ),
        ),
        ("app/web.yaml", deployment(replicas)),
    ]
}

/// Deployment `web` (nginx) with `replicas`.
pub fn deployment(replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n"
    )
}

/// The Jobs in `ns`.
pub async fn jobs(ns: &TestNamespace) -> Vec<k8s_openapi::api::batch::v1::Job> {
    Api::<k8s_openapi::api::batch::v1::Job>::namespaced(ns.client.clone(), &ns.name)
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items
}

/// The configuration `tether run --watch-namespace` would use for `ns`,
/// with a 2 s safety-net resync.
pub fn config_for(ns: &TestNamespace) -> Config {
    Config {
        resync: Duration::from_secs(2),
        cache_dir: ns.cache_dir(),
        lease_namespace: ns.name.clone(),
        identity: format!("test-{}", ns.name),
        watch_namespace: Some(ns.name.clone()),
        ..Config::default()
    }
}

/// Starts a controller for `ns` only, as `tether run --watch-namespace` would.
pub async fn start_controller(ns: &TestNamespace) {
    start_controller_with(ns, config_for(ns)).await;
}

/// Installs Tether into `ns` and starts a controller with `config`.
pub async fn start_controller_with(ns: &TestNamespace, config: Config) {
    tether_testkit::log_file();
    install::install(ns.client.clone(), &ns.name).await.unwrap();
    spawn_controller(ns, config);
}

/// Runs a controller with `config` until aborted.
pub fn spawn_controller(ns: &TestNamespace, config: Config) -> JoinHandle<()> {
    let client = ns.client.clone();
    tokio::spawn(async move {
        if let Err(error) = tether_controller::run(client, config).await {
            panic!("controller stopped: {error}");
        }
    })
}

/// A namespace with a controller running for it.
pub async fn started(prefix: &str) -> TestNamespace {
    let ns = TestNamespace::create(prefix).await;
    start_controller(&ns).await;
    ns
}

/// A namespace with a running controller, a repository with the web app
/// (2 replicas, greeting "hello") and Application `shop` for it with
/// `sync_policy`.
pub async fn web_app(prefix: &str, sync_policy: Value) -> (TestNamespace, Repo, Api<Application>) {
    app_of(prefix, &web(2, "hello"), sync_policy).await
}

/// A namespace with a running controller, a repository whose first commit
/// (its `head()`) is `files`, and Application `shop` for its `app/` with
/// `sync_policy`.
pub async fn app_of(
    prefix: &str,
    files: &[(impl AsRef<str>, impl AsRef<str>)],
    sync_policy: Value,
) -> (TestNamespace, Repo, Api<Application>) {
    let ns = TestNamespace::create(prefix).await;
    let repo = Repo::new();
    repo.commit(files, "first");
    start_controller(&ns).await;
    let apps = create_app_with(&ns, &repo, sync_policy).await;
    (ns, repo, apps)
}

/// Application `name` in `ns` for `path` of `repo`.
pub fn app(ns: &TestNamespace, name: &str, repo: &Repo, path: &str) -> AppFixture {
    application(name, &ns.name, &repo.url(), path)
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
    app(ns, "shop", repo, "app")
        .sync_policy(sync_policy)
        .apply(&ns.client)
        .await
}

/// The status of Application `shop` once its sync failed with a message
/// containing `saying` (`what` names the wait in a timeout).
pub async fn sync_failed(apps: &Api<Application>, what: &str, saying: &str) -> ApplicationStatus {
    status_where(apps, what, |s| {
        s.operation_state
            .as_ref()
            .is_some_and(|o| o.phase == "Failed" && o.message.contains(saying))
    })
    .await
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

/// Waits until ConfigMap `greeting` in `ns` says `text` (the hostile-input
/// tests' bystander app keeps syncing).
pub async fn greeting_is(ns: &TestNamespace, text: &str) {
    let config_maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(ns.client.clone(), &ns.name);
    tether_testkit::eventually(&format!("greeting {text:?}"), || async {
        let found = config_maps.get_opt("greeting").await.ok()??;
        (found.data?.get("text")? == text).then_some(())
    })
    .await;
}
