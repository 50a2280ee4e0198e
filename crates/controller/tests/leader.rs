//! Two controllers, one leader: only the Lease holder reconciles, and when
//! it dies the other takes over; a replica whose Lease was taken while it
//! synced stops before its next wave (fencing).

mod support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::{Repo, config_for, create_app_with, status_where};
use tether_controller::{Config, install};
use tether_testkit::{TestNamespace, eventually};

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("tether-controller")
        .await
        .ok()??
        .spec?
        .holder_identity
}

async fn wait_for_holder(leases: &Api<Lease>, want: impl Fn(&str) -> bool) -> String {
    eventually("the expected lease holder", || async {
        holder(leases).await.filter(|id| want(id))
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn only_one_of_two_controllers_leads_and_the_other_takes_over_when_it_dies() {
    let ns = TestNamespace::create("leader").await;
    install::install(ns.client.clone(), &ns.name).await.unwrap();
    let start = |identity: &str| {
        let config = Config {
            lease_namespace: ns.name.clone(),
            identity: identity.to_string(),
            watch_namespace: Some(ns.name.clone()),
            cache_dir: ns.cache_dir().join(identity),
            ..Config::default()
        };
        tokio::spawn(tether_controller::run(ns.client.clone(), config))
    };
    let first = start("first");
    let leases: Api<Lease> = Api::namespaced(ns.client.clone(), &ns.name);
    wait_for_holder(&leases, |id| id == "first").await;
    let second = start("second");

    // While the first lives, it keeps the lease.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(holder(&leases).await.as_deref(), Some("first"));
    assert!(!second.is_finished());

    // Kill the leader: the second takes over once the lease expires.
    first.abort();
    wait_for_holder(&leases, |id| id == "second").await;
    second.abort();
}

/// A Service that stays Progressing until its status gets an ingress point
/// (wave 0), and a ConfigMap after it (wave 1).
fn gated_waves() -> Vec<(&'static str, String)> {
    vec![
        (
            "app/gate.yaml",
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: gate\n  annotations: {tether.dev/sync-wave: \"0\"}\nspec:\n  type: LoadBalancer\n  selector: {app: gate}\n  ports: [{port: 80}]\n".into(),
        ),
        (
            "app/after.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: after\n  annotations: {tether.dev/sync-wave: \"1\"}\ndata: {wave: \"1\"}\n".into(),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leader_whose_lease_was_taken_mid_sync_applies_no_further_wave() {
    let ns = TestNamespace::create("fence").await;
    install::install(ns.client.clone(), &ns.name).await.unwrap();
    let repo = Repo::new();
    repo.commit(&gated_waves(), "two waves");
    let config = Config {
        identity: "first".into(),
        ..config_for(&ns)
    };
    let first = tokio::spawn(tether_controller::run(ns.client.clone(), config));
    let leases: Api<Lease> = Api::namespaced(ns.client.clone(), &ns.name);
    wait_for_holder(&leases, |id| id == "first").await;
    let apps = create_app_with(&ns, &repo, json!({"waitForWaves": true})).await;
    // Waiting on wave 0: applied, not yet healthy (Running alone is
    // written before wave 0 is applied, and the gate would not exist yet).
    status_where(&apps, "the sync waiting on wave 0", |s| {
        s.operation_state
            .as_ref()
            .is_some_and(|o| o.phase == "Running" && o.waiting.is_some())
    })
    .await;

    // The Lease passes to another replica (as when this one was paused
    // past its expiry), and at once wave 0 becomes healthy: the first
    // replica's lease task has not renewed yet, so it still believes it
    // leads when its wave gate opens.
    let usurped = json!({"spec": {"holderIdentity": "usurper", "leaseDurationSeconds": 3600,
        "renewTime": format_micro_time(std::time::SystemTime::now())}});
    leases
        .patch(
            "tether-controller",
            &PatchParams::default(),
            &Patch::Merge(&usurped),
        )
        .await
        .unwrap();
    ns.kubectl_ok(&[
        "patch",
        "service",
        "gate",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.1"}]}}}"#,
    ]);

    // The sync stops before wave 1 (or, if it had yielded while waiting,
    // before it resumes), saying why; wave 1 is never applied.
    let status = status_where(&apps, "the sync fenced", |s| {
        s.operation_state
            .as_ref()
            .is_some_and(|o| o.phase == "Failed")
    })
    .await;
    let message = &status.operation_state.unwrap().message;
    assert!(
        message.contains("stopped before wave ")
            && message.contains("held by usurper")
            && message.contains("only the leader writes"),
        "{message}"
    );
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(config_maps.get_opt("after").await.unwrap().is_none());
    // And the replica stops leading once its lease task sees the Lease.
    let stopped = tokio::time::timeout(Duration::from_secs(30), first)
        .await
        .expect("the replica stops within a renewal")
        .unwrap();
    assert!(stopped.is_err(), "{stopped:?}");
}

/// `time` as a Kubernetes MicroTime (RFC 3339 with microseconds, UTC).
fn format_micro_time(time: std::time::SystemTime) -> String {
    let micros = time
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros();
    k8s_openapi::jiff::Timestamp::from_microsecond(micros as i64)
        .unwrap()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}
