//! A failed sync is retried at once when what it found missing appears
//! (the namespace, or the kind whose CRD was not installed), not at the
//! next resync; and `syncPolicy.createNamespace` creates the destination
//! so there is nothing to retry. The retry tests' controller resyncs only
//! every 5 minutes and backs off a minute, so only the retry itself can
//! make them pass in time.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use support::{
    Repo, app, config_for, start_controller, start_controller_with, status_where, sync_failed, web,
};
use tether_controller::Config;
use tether_controller::api::Application;
use tether_controller::api::application::{CREATED_FOR_ANNOTATION, MANAGED_BY_LABEL};
use tether_core::tracking::APP_LABEL;
use tether_testkit::{TestNamespace, eventually};

/// How long from now the app takes to be Synced once `what` was created.
async fn time_to_synced(apps: &Api<Application>, what: &str) -> Duration {
    let created = Instant::now();
    status_where(apps, &format!("Synced once the {what} exists"), |s| {
        s.sync.status == "Synced"
    })
    .await;
    let waited = created.elapsed();
    println!("{what} created -> Synced: {waited:?}");
    waited
}

/// A namespace with a controller that resyncs every 5 minutes, and a
/// repository with the web app.
async fn slow_controller(prefix: &str) -> (TestNamespace, Repo) {
    let ns = TestNamespace::create(prefix).await;
    let config = Config {
        resync: Duration::from_secs(300),
        ..config_for(&ns)
    };
    start_controller_with(&ns, config).await;
    let repo = Repo::new();
    repo.commit(&web(1, "hello"), "first");
    (ns, repo)
}

/// Namespace `name`, removed when dropped.
struct Destination {
    api: Api<Namespace>,
    name: String,
}

impl Destination {
    fn new(ns: &TestNamespace, suffix: &str) -> Destination {
        Destination {
            api: Api::all(ns.client.clone()),
            name: format!("{}-{suffix}", ns.name),
        }
    }
}

impl Drop for Destination {
    fn drop(&mut self) {
        let (api, name) = (self.api.clone(), self.name.clone());
        tokio::spawn(async move { api.delete(&name, &DeleteParams::default()).await });
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sync_that_failed_for_a_missing_namespace_applies_once_the_namespace_exists() {
    let (ns, repo) = slow_controller("retry").await;
    let late = Destination::new(&ns, "late");
    let apps = app(&ns, "shop", &repo, "app")
        .destination(&late.name)
        .sync_policy(json!({"retry": {"limit": 5, "backoffSeconds": 60}}))
        .apply(&ns.client)
        .await;
    let failed = sync_failed(&apps, "the sync failed: no namespace", "not found").await;
    let message = &failed.operation_state.unwrap().message;
    assert!(message.contains(&late.name), "{message}");

    // `kubectl create ns`: the retry does not wait for the back-off (60 s)
    // or the resync (300 s).
    let namespace = serde_json::from_value(json!({"metadata": {"name": late.name}})).unwrap();
    late.api
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let waited = time_to_synced(&apps, "namespace").await;
    assert!(waited < Duration::from_secs(30), "{waited:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn create_namespace_makes_the_destination_as_tethers_and_prune_never_deletes_it() {
    // An ordinary controller: a new commit is found at its next resync.
    let ns = TestNamespace::create("mkns").await;
    start_controller(&ns).await;
    let repo = Repo::new();
    repo.commit(&web(1, "hello"), "first");
    let made = Destination::new(&ns, "made");
    let apps = app(&ns, "shop", &repo, "app")
        .destination(&made.name)
        .sync_policy(json!({"createNamespace": true, "prune": true}))
        .apply(&ns.client)
        .await;
    status_where(&apps, "Synced into a namespace it created", |s| {
        s.sync.status == "Synced"
    })
    .await;
    let namespace = made.api.get(&made.name).await.unwrap();
    assert_eq!(namespace.labels()[MANAGED_BY_LABEL], "tether");
    assert_eq!(
        namespace.annotations()[CREATED_FOR_ANNOTATION],
        format!("Application {}/shop", ns.name)
    );
    assert!(!namespace.labels().contains_key(APP_LABEL));

    // Prune removes what Git dropped, and never the namespace.
    let files = web(1, "hello");
    let kept: Vec<(&str, String)> = files
        .into_iter()
        .filter(|(path, _)| *path != "app/config.yaml")
        .collect();
    repo.git(&["rm", "-q", "app/config.yaml"]);
    repo.commit(&kept, "drop the ConfigMap");
    status_where(&apps, "the ConfigMap pruned", |s| {
        s.orphans.iter().any(|o| o.prune == "Deleted")
    })
    .await;
    eventually("the namespace is still there", || async {
        made.api
            .get_opt(&made.name)
            .await
            .unwrap()
            .filter(|n| n.metadata.deletion_timestamp.is_none())
            .map(|_| ())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sync_that_failed_for_a_missing_kind_applies_once_its_crd_is_installed() {
    let (ns, repo) = slow_controller("retrycrd").await;
    let group = format!("{}.example.com", ns.name);
    let mut files = web(1, "hello");
    files.push((
        "app/widget.yaml",
        format!(
            "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: blue\nspec:\n  size: 3\n"
        ),
    ));
    repo.commit(&files, "a widget, whose CRD another app installs");
    let apps = app(&ns, "shop", &repo, "app")
        .sync_policy(json!({"retry": {"limit": 5, "backoffSeconds": 60}}))
        .apply(&ns.client)
        .await;
    let failed = sync_failed(&apps, "the sync failed: no such kind", "Widget").await;
    let message = failed.operation_state.unwrap().message;
    assert!(
        message.contains("is its CustomResourceDefinition installed?"),
        "{message}"
    );
    assert!(!message.contains("Status {"), "{message}");

    // The CRD appears (installed by hand, as another app would): the retry
    // does not wait for the back-off (60 s) or the resync (300 s).
    let crd = tether_testkit::crd(
        &group,
        "Widget",
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    );
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(ns.client.clone());
    let crd_name = format!("widgets.{group}");
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crd).unwrap(),
    )
    .await
    .unwrap();
    let waited = time_to_synced(&apps, "CRD").await;
    let _ = crds.delete(&crd_name, &DeleteParams::default()).await;
    assert!(waited < Duration::from_secs(30), "{waited:?}");
}
