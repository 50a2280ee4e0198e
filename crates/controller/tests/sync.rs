//! The sync step against the real local control plane: validate the whole
//! set by dry-run, then apply in order.

use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::{Value, json};
use tether_cluster::{Applier, Resources};
use tether_controller::{SyncError, sync_manifests};
use tether_core::Action;
use tether_core::tracking::{APP_LABEL, AppRef, TRACKING_ANNOTATION};
use tether_source::Manifest;
use tether_testkit::{TestNamespace, crd};

/// Renders `objects` the way Git content is rendered: one file each.
fn manifests(objects: Vec<Value>) -> Vec<Manifest> {
    let dir = std::env::temp_dir().join(format!(
        "tether-sync-test-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    for (index, object) in objects.iter().enumerate() {
        std::fs::write(dir.join(format!("{index:02}.json")), object.to_string()).unwrap();
    }
    let rendered = tether_source::render_directory(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    rendered
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

#[tokio::test]
async fn a_set_with_one_invalid_object_applies_nothing_and_names_the_object() {
    let ns = TestNamespace::create("invalid").await;
    let applier = Applier::new(Resources::new(ns.client.clone()), ns.name.clone());
    let bad = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "bad"},
        "spec": {"ports": [{"port": "not-a-number"}]}});
    let set = manifests(vec![config_map("first"), bad, config_map("last")]);

    let error = sync_manifests(&applier, &AppRef::new(&ns.name, "app"), &set)
        .await
        .unwrap_err();
    assert!(matches!(error, SyncError::Validate(_)), "{error}");
    let message = error.to_string();
    assert!(
        message.contains(&format!("Service {}/bad", ns.name)),
        "{message}"
    );

    let config_maps = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name);
    for name in ["first", "last"] {
        assert!(
            config_maps.get_opt(name).await.unwrap().is_none(),
            "{name} must not exist"
        );
    }
}

#[tokio::test]
async fn a_crd_and_its_custom_resource_sync_in_one_pass() {
    let ns = TestNamespace::create("crd-sync").await;
    let applier = Applier::new(Resources::new(ns.client.clone()), ns.name.clone());
    let group = format!("{}.example.com", ns.name);
    let crd = crd(
        &group,
        "Gadget",
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    );
    let gadget = json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget",
        "metadata": {"name": "g1"}, "spec": {"colour": "red"}});
    // The custom resource comes first in Git; apply order fixes that.
    let set = manifests(vec![gadget, crd]);

    let report = sync_manifests(&applier, &AppRef::new(&ns.name, "app"), &set)
        .await
        .unwrap();
    let kinds: Vec<(&str, Action)> = report
        .results
        .iter()
        .map(|(id, action)| (id.kind.as_str(), *action))
        .collect();
    assert_eq!(
        kinds,
        [
            ("CustomResourceDefinition", Action::Created),
            ("Gadget", Action::Created)
        ]
    );
    let _ = ns.kubectl(&["delete", "crd", &format!("gadgets.{group}"), "--wait=false"]);
}

#[tokio::test]
async fn objects_in_a_namespace_the_set_creates_are_validated_after_it_exists() {
    let ns = TestNamespace::create("ns-sync").await;
    let applier = Applier::new(Resources::new(ns.client.clone()), ns.name.clone());
    let target = format!("{}-app", ns.name);
    let mut in_target = config_map("settings");
    in_target["metadata"]["namespace"] = json!(target);
    let set = manifests(vec![
        in_target,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": target}}),
    ]);

    let app = AppRef::new(&ns.name, "app");
    let report = sync_manifests(&applier, &app, &set).await.unwrap();
    assert_eq!(report.count(Action::Created), 2);

    let live = Api::<ConfigMap>::namespaced(ns.client.clone(), &target)
        .get("settings")
        .await
        .unwrap();
    let labels = live.metadata.labels.unwrap();
    assert_eq!(labels[APP_LABEL], app.label_value());
    let annotations = live.metadata.annotations.unwrap();
    assert_eq!(
        annotations[TRACKING_ANNOTATION],
        format!("{}/app:/ConfigMap:{target}/settings", ns.name)
    );
    let again = sync_manifests(&applier, &app, &set).await.unwrap();
    assert_eq!(again.count(Action::Unchanged), 2);
    let _ = ns.kubectl(&["delete", "namespace", &target, "--wait=false"]);
}
