//! Integration tests against the real local control plane (kube-local):
//! server-side apply and dry-run, kubectl's field managers, CRDs, and the
//! controller-manager + fake kubelet making workloads run or fail.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::ListParams;
use serde_json::{Value, json};
use tether_cluster::{Applier, Resources};
use tether_core::Action;
use tether_testkit::{PATIENCE, TestNamespace, crd, eventually, run_ok};

fn applier(ns: &TestNamespace) -> Applier {
    Applier::new(Resources::new(ns.client.clone()), ns.name.clone())
}

fn config_map(colour: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings"}, "data": {"colour": colour}})
}

#[tokio::test]
async fn server_side_apply_creates_an_object_owned_by_tether_and_dry_run_changes_nothing() {
    let ns = TestNamespace::create("ssa").await;
    let applier = applier(&ns);

    let created = applier.apply(&config_map("blue"), false).await.unwrap();
    assert_eq!(created.action, Action::Created);
    assert_eq!(
        created.object.to_string(),
        format!("ConfigMap {}/settings", ns.name)
    );
    let again = applier.apply(&config_map("blue"), false).await.unwrap();
    assert_eq!(again.action, Action::Unchanged);

    let dry_run = applier.apply(&config_map("green"), true).await.unwrap();
    assert_eq!(dry_run.action, Action::Configured);
    assert_eq!(dry_run.live["data"]["colour"], "green");

    let live: ConfigMap = ns.get("settings").await;
    assert_eq!(
        live.data.unwrap()["colour"],
        "blue",
        "dry-run must persist nothing"
    );
    let managers: Vec<_> = live
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .map(|entry| {
            (
                entry.manager.unwrap_or_default(),
                entry.operation.unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(managers, [("tether".to_string(), "Apply".to_string())]);
}

#[tokio::test]
async fn kubectl_edit_shows_up_in_managed_fields_under_kubectl_edit() {
    let ns = TestNamespace::create("edit").await;
    applier(&ns)
        .apply(&config_map("blue"), false)
        .await
        .unwrap();

    // kubectl edit runs $KUBE_EDITOR on a temporary file, as an operator would.
    run_ok(
        ns.kubectl_command(&["edit", "configmap/settings"])
            .env("KUBE_EDITOR", "sed -i s/blue/green/"),
    );

    let live: ConfigMap = ns.get("settings").await;
    assert_eq!(live.data.unwrap()["colour"], "green");
    let editor = live
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .find(|entry| entry.manager.as_deref() != Some("tether"))
        .expect("a second field manager");
    assert_eq!(editor.manager.as_deref(), Some("kubectl-edit"));
    assert_eq!(editor.operation.as_deref(), Some("Update"));
    let fields = serde_json::to_value(editor.fields_v1.unwrap()).unwrap();
    assert!(
        fields.pointer("/f:data/f:colour").is_some(),
        "kubectl-edit owns data.colour: {fields}"
    );
}

#[tokio::test]
async fn a_crd_becomes_established_and_serves_its_custom_resources() {
    let ns = TestNamespace::create("crd").await;
    let applier = applier(&ns);
    let group = format!("{}.example.com", ns.name);
    let crd = crd(
        &group,
        "Widget",
        json!({"type": "object",
            "properties": {"spec": {"type": "object",
                "properties": {"size": {"type": "integer"}}}}}),
    );
    let applied = applier.apply(&crd, false).await.unwrap();
    assert_eq!(applied.action, Action::Created);
    assert!(
        applied.object.namespace.is_none(),
        "CRDs are cluster-scoped"
    );

    tether_cluster::wait::crd_established(ns.client.clone(), &format!("widgets.{group}"), PATIENCE)
        .await
        .unwrap();

    let widget = json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": "first"}, "spec": {"size": 3}});
    let applied = applier.apply(&widget, false).await.unwrap();
    assert_eq!(applied.action, Action::Created);
    assert_eq!(applied.live["spec"]["size"], 3);

    let _ = ns.kubectl(&["delete", "crd", &format!("widgets.{group}"), "--wait=false"]);
}

/// A two-replica Deployment `name` whose pods run `container`.
fn deployment(name: &str, container: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [container]}}}})
}

/// A container `app` of `image` that asks for no resources.
fn container(image: &str) -> Value {
    json!({"name": "app", "image": image})
}

/// A new namespace (`prefix`) with Deployment `name` running `container` applied.
async fn deployed(prefix: &str, name: &str, container: Value) -> TestNamespace {
    let ns = TestNamespace::create(prefix).await;
    applier(&ns)
        .apply(&deployment(name, container), false)
        .await
        .unwrap();
    ns
}

/// Waits until Deployment `name` has both its replicas available.
async fn both_replicas_available(ns: &TestNamespace, name: &str) {
    let deployments = ns.api::<Deployment>();
    eventually(
        &format!("Deployment {name} to have 2 available replicas"),
        || async {
            let status = deployments.get(name).await.ok()?.status?;
            (status.available_replicas == Some(2)).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_deployment_becomes_available_on_the_fake_kubelet() {
    let ns = deployed("deploy", "web", container("nginx:1.27")).await;
    both_replicas_available(&ns, "web").await;
}

#[tokio::test]
async fn a_deployment_with_cpu_and_memory_requests_and_limits_becomes_available() {
    let app = json!({"name": "app", "image": "nginx:1.27",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
            "limits": {"cpu": "500m", "memory": "128Mi"}}});
    let ns = deployed("resources", "sized", app).await;
    both_replicas_available(&ns, "sized").await;

    // The API server chose the class when it created each pod; the fake
    // kubelet's status updates keep it.
    let pods = ns
        .api::<Pod>()
        .list(&ListParams::default().labels("app=sized"))
        .await
        .unwrap();
    let classes: Vec<_> = pods
        .items
        .into_iter()
        .filter_map(|pod| pod.status?.qos_class)
        .collect();
    assert!(
        !classes.is_empty() && classes.iter().all(|class| class == "Burstable"),
        "{classes:?}"
    );
}

#[tokio::test]
async fn a_crashing_container_shows_crash_loop_back_off_in_its_pod_status() {
    let ns = deployed("crash", "broken", container("tether.test/crashloop:1")).await;
    let pods = ns.api::<Pod>();
    let (reason, restarts) = eventually("a pod in CrashLoopBackOff", || async {
        let list = pods
            .list(&ListParams::default().labels("app=broken"))
            .await
            .ok()?;
        list.items.into_iter().find_map(|pod| {
            let container = pod.status?.container_statuses?.into_iter().next()?;
            let reason = container.state?.waiting?.reason?;
            Some((reason, container.restart_count))
        })
    })
    .await;
    assert_eq!(reason, "CrashLoopBackOff");
    assert!(restarts >= 1);
}
