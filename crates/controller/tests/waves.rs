//! Sync waves gated on health (`syncPolicy.waitForWaves`), against the real
//! local control plane, where the fake kubelet runs the Deployments: the
//! image `tether.test/crashloop` never becomes ready.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use support::waves::{synced_wave_by_wave, two_waves};
use support::{Repo, create_app_with, start_controller, status_where, sync_failed};
use tether_testkit::{TestNamespace, condition};

/// Tether's own wave annotation.
const ANNOTATION: &str = "tether.dev/sync-wave";

#[tokio::test(flavor = "multi_thread")]
async fn a_wave_that_never_becomes_healthy_holds_back_the_next_and_is_named() {
    let ns = TestNamespace::create("waves-blocked").await;
    let repo = Repo::new();
    repo.commit(
        &two_waves(ANNOTATION, "tether.test/crashloop:1"),
        "a crashing wave 0",
    );
    start_controller(&ns).await;
    let apps = create_app_with(
        &ns,
        &repo,
        json!({"waitForWaves": true, "waveTimeoutSeconds": 8}),
    )
    .await;
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);

    // While wave 0 is unhealthy, wave 1 is not applied.
    status_where(&apps, "the sync running", |s| {
        s.operation_state
            .as_ref()
            .is_some_and(|o| o.phase == "Running")
    })
    .await;
    assert!(config_maps.get_opt("after-web").await.unwrap().is_none());

    // The sync fails after the wave timeout, naming the Deployment.
    let status = sync_failed(&apps, "the sync failed on wave 0", "").await;
    let message = &status.operation_state.as_ref().unwrap().message;
    assert!(
        message.starts_with(&format!(
            "Deployment {}/web: not healthy after 8s, so the waves after wave 0 were not applied",
            ns.name
        )),
        "{message}"
    );
    let reconciled = condition(&status, "Reconciled").unwrap();
    assert_eq!(reconciled.reason, "ApplyFailed");
    assert!(config_maps.get_opt("after-web").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_healthy_wave_lets_the_next_one_apply_after_it() {
    let ns = TestNamespace::create("waves-healthy").await;
    let repo = Repo::new();
    let commit = repo.commit(&two_waves(ANNOTATION, "nginx:1.27"), "a healthy wave 0");
    start_controller(&ns).await;
    let apps = create_app_with(&ns, &repo, json!({"waitForWaves": true})).await;

    let status = synced_wave_by_wave(&ns, &apps, &commit).await;
    assert_eq!(status.operation_state.unwrap().phase, "Succeeded");
    // The ConfigMap was created only once the Deployment was available.
    let deployment = ns.kubectl(&[
        "get",
        "deployment",
        "web",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Available\")].lastTransitionTime}",
    ]);
    let available = String::from_utf8_lossy(&deployment.stdout).to_string();
    let created = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .get("after-web")
        .await
        .unwrap()
        .metadata
        .creation_timestamp
        .unwrap()
        .0
        .to_string();
    assert!(!available.is_empty());
    assert!(
        created >= available,
        "created {created}, available {available}"
    );
}
