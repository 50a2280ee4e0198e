//! One malformed Application must not stop the others. The review stored
//! Applications with `source: {}`, `path: 7`, an unknown renderer and
//! `valueFiles: "x"` (the CRD of the time accepted any spec), and a
//! restarted controller could list no Application at all. This binary has
//! a control plane of its own because it installs that old, open CRD.

mod support;

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use support::{Repo, config_for, status_where, web};
use tether_controller::api::Application;
use tether_controller::serve::probe::Verdict;
use tether_controller::{Probe, Trigger, install};
use tether_testkit::{TestNamespace, eventually};

/// The Application CRD as it was before it had a structural schema for
/// its spec: the API server stored any spec.
fn open_crd() -> Value {
    let mut crd = serde_json::to_value(Application::crd()).unwrap();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] =
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    crd
}

fn application(ns: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": "tether.dev/v1alpha1", "kind": "Application",
        "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

/// The malformed specs of the review, with the field each gets wrong.
fn malformed(repo: &str, ns: &str) -> Vec<(&'static str, Value, &'static str)> {
    let dest = json!({"namespace": ns});
    vec![
        (
            "empty-source",
            json!({"source": {}, "destination": dest}),
            "spec.source",
        ),
        (
            "numeric-path",
            json!({"source": {"repoURL": repo, "path": 7}, "destination": dest}),
            "spec.source.path",
        ),
        (
            "unknown-renderer",
            json!({"source": {"repoURL": repo, "renderer": {"ansible": {}}}, "destination": dest}),
            "spec.source.renderer",
        ),
        (
            "string-value-files",
            json!({"source": {"repoURL": repo, "renderer": {"helm": {"valueFiles": "x"}}},
                   "destination": dest}),
            "spec.source.renderer.helm.valueFiles",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malformed_application_among_good_ones_gets_its_own_condition_across_a_restart() {
    let ns = TestNamespace::create("malformed").await;
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    crds.patch(
        "applications.tether.dev",
        &PatchParams::apply("tether").force(),
        &Patch::Apply(&open_crd()),
    )
    .await
    .unwrap();
    tether_cluster::wait::crd_established(
        ns.client.clone(),
        "applications.tether.dev",
        Duration::from_secs(60),
    )
    .await
    .unwrap();

    // The good app and the review's malformed ones, stored under the old CRD.
    let repo = Repo::new();
    repo.commit(&web(1, "hello"), "first");
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "tether.dev",
        "v1alpha1",
        "Application",
    ));
    let raw: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let mut all = vec![(
        "shop",
        json!({"source": {"repoURL": repo.url(), "path": "app"}, "destination": {"namespace": ns.name}}),
        "",
    )];
    all.extend(malformed(&repo.url(), &ns.name));
    for (name, spec, _) in &all {
        let object: DynamicObject =
            serde_json::from_value(application(&ns.name, name, spec.clone())).unwrap();
        raw.patch(name, &PatchParams::apply("test"), &Patch::Apply(&object))
            .await
            .unwrap_or_else(|error| panic!("storing {name}: {error}"));
    }
    // What stopped the controller: a typed list fails on one bad item.
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &ns.name);
    assert!(apps.list(&Default::default()).await.is_err());

    // The controller starts (as after a restart), installing today's CRD.
    tether_testkit::log_file();
    install::install(ns.client.clone(), &ns.name).await.unwrap();
    let probe = Probe::default();
    let (client, config, running) = (ns.client.clone(), config_for(&ns), probe.clone());
    tokio::spawn(async move {
        let stopped =
            tether_controller::run_with(client, config, Trigger::default(), running).await;
        panic!("controller stopped: {stopped:?}");
    });

    // The good app syncs; each bad one has a condition naming its field.
    status_where(&apps, "the good app Synced", |s| s.sync.status == "Synced").await;
    let stored: Api<DynamicObject> = raw.clone();
    for (name, _, field) in all.iter().skip(1) {
        let message = eventually(&format!("{name}: InvalidSpec"), || async {
            let object = stored.get(name).await.ok()?;
            let conditions = object
                .data
                .pointer("/status/conditions")?
                .as_array()?
                .clone();
            conditions
                .iter()
                .find(|c| c["reason"] == "InvalidSpec" && c["status"] == "False")
                .and_then(|c| c["message"].as_str().map(str::to_string))
        })
        .await;
        assert!(
            message.contains(&format!("Application {}/{name}", ns.name)) && message.contains(field),
            "{name}: {message}"
        );
    }
    assert_eq!(
        probe.ready(),
        Verdict::Ok,
        "the controller lists its Applications"
    );

    // With today's CRD, kubectl refuses each of them, naming the field.
    for (name, spec, field) in malformed(&repo.url(), &ns.name) {
        let manifest =
            serde_json::to_string(&application(&ns.name, &format!("{name}-new"), spec)).unwrap();
        let output = ns.kubectl_with_stdin(&["apply", "-f", "-"], &manifest);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{name} was accepted");
        assert!(stderr.contains(field), "{name}: {stderr}");
    }
}
