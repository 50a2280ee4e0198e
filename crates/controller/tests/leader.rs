//! Two controllers, one leader: only the Lease holder reconciles, and when
//! it dies the other takes over.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
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
