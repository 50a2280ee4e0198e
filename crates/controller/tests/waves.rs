//! Sync waves gated on health (`syncPolicy.waitForWaves`), against the real
//! local control plane, where the fake kubelet runs the Deployments: the
//! image `tether.test/crashloop` never becomes ready.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use support::waves::{synced_wave_by_wave, two_waves};
use support::{
    Repo, app, app_of, config_for, create_app_with, start_controller_with, status_where,
    sync_failed,
};
use tether_controller::Config;
use tether_testkit::{TestNamespace, assert_starts_with, condition, status_of};

/// Tether's own wave annotation.
const ANNOTATION: &str = "tether.dev/sync-wave";

#[tokio::test(flavor = "multi_thread")]
async fn a_wave_that_never_becomes_healthy_holds_back_the_next_and_is_named() {
    let (ns, _repo, apps) = app_of(
        "waves-blocked",
        &two_waves(ANNOTATION, "tether.test/crashloop:1"),
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
    assert_starts_with(
        &status.operation_state.as_ref().unwrap().message,
        &format!(
            "Deployment {}/web: not healthy after 8s, so the waves after wave 0 were not applied",
            ns.name
        ),
    );
    let reconciled = condition(&status, "Reconciled").unwrap();
    assert_eq!(reconciled.reason, "ApplyFailed");
    assert!(config_maps.get_opt("after-web").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_healthy_wave_lets_the_next_one_apply_after_it() {
    let (ns, repo, apps) = app_of(
        "waves-healthy",
        &two_waves(ANNOTATION, "nginx:1.27"),
        json!({"waitForWaves": true}),
    )
    .await;

    let status = synced_wave_by_wave(&ns, &apps, &repo.head()).await;
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

#[tokio::test(flavor = "multi_thread")]
async fn a_sync_waiting_for_a_wave_holds_no_worker_and_resumes_where_it_was() {
    // One worker: while app `shop` waits on its wave 0 (a Deployment that
    // never becomes ready), app `other` must still sync at once.
    let ns = TestNamespace::create("waves-worker").await;
    let repo = Repo::new();
    repo.commit(
        &two_waves(ANNOTATION, "tether.test/crashloop:1"),
        "a crashing wave 0",
    );
    let config = Config {
        concurrency: 1,
        ..config_for(&ns)
    };
    start_controller_with(&ns, config).await;
    let apps = create_app_with(
        &ns,
        &repo,
        json!({"waitForWaves": true, "waveTimeoutSeconds": 600}),
    )
    .await;
    let waiting = status_where(&apps, "the sync waiting for wave 0", |s| {
        s.operation_state
            .as_ref()
            .is_some_and(|o| o.phase == "Running" && o.waiting.is_some())
    })
    .await;
    let operation = waiting.operation_state.unwrap();
    let wait = operation.waiting.unwrap();
    assert_eq!(wait.wave, 0);
    assert_starts_with(&wait.object, &format!("Deployment {}/web", ns.name));
    assert!(operation.finished_at.is_none());

    let other_repo = Repo::new();
    let other_commit = other_repo.commit(
        &[(
            "app/other.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  app: other\n",
        )],
        "other",
    );
    let asked = std::time::Instant::now();
    app(&ns, "other", &other_repo, "app")
        .apply(&ns.client)
        .await;
    status_of(&apps, "other", "the other app Synced", |s| {
        s.sync.revision.as_deref() == Some(other_commit.as_str()) && s.sync.status == "Synced"
    })
    .await;
    let took = asked.elapsed();
    assert!(
        took < std::time::Duration::from_secs(20),
        "the other app waited {took:?} for the one worker"
    );

    // The waiting sync is the same operation, waiting since it began, and
    // wave 1 is still not applied.
    let status = status_where(&apps, "still waiting", |s| {
        s.operation_state
            .as_ref()
            .is_some_and(|o| o.waiting.is_some())
    })
    .await;
    let again = status.operation_state.unwrap();
    assert_eq!(again.started_at, operation.started_at);
    assert_eq!(again.waiting.unwrap().since, wait.since);
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    assert!(config_maps.get_opt("after-web").await.unwrap().is_none());
    // No drift is reported for the wave not applied yet.
    assert!(status.drift.is_empty(), "{:?}", status.drift);

    // Wave 0 becomes healthy (a new commit with a good image): the sync
    // of that commit goes wave by wave to the end.
    let commit = repo.commit(&two_waves(ANNOTATION, "nginx:1.27"), "a healthy wave 0");
    synced_wave_by_wave(&ns, &apps, &commit).await;
}
