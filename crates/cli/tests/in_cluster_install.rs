//! `tether install --image`: the controller as users run it, in the
//! cluster it manages, two replicas of real processes (kube-local's exec
//! kubelet runs the image `tether:dev` as this build's `tether`), each in
//! its own network namespace with only its ServiceAccount's token. No
//! process here runs the controller with an admin kubeconfig.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};
use serde_json::json;
use tether_core::SyncStatus;
use tether_testkit::in_cluster::{self, NAMESPACE};
use tether_testkit::{Repo, application, client_for, eventually, run_ok, status_where};

fn config_map(greeting: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\ndata:\n  greeting: {greeting}\n"
    )
}

#[tokio::test]
async fn installed_replicas_fail_over_within_10s_upgrade_keeping_status_and_uninstall_leaving_what_they_applied()
 {
    let work = in_cluster::workspace(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let tether = Path::new(env!("CARGO_BIN_EXE_tether"));
    let plane = in_cluster::plane(&work.path().join("plane"), tether);
    let admin = plane.kubeconfig();
    let client = client_for(admin).await;
    let kubectl = |args: &[&str]| {
        run_ok(
            Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(admin)
                .args(args),
        )
    };

    let greeting = || {
        kubectl(&[
            "get",
            "configmap",
            "-n",
            "shop",
            "greeting",
            "-o",
            "jsonpath={.data.greeting}",
        ])
    };

    // Two replicas come up; one holds the Lease and labels its pod, and
    // the Service's endpoints are that pod alone.
    in_cluster::install(tether, admin, in_cluster::IMAGE, &[]);
    let ready = in_cluster::ready(&client, 2).await;
    eprintln!("figure: tether install to 2 ready replicas: {ready:.1?}");
    let leader = eventually("a leader", || in_cluster::leader(&client)).await;
    eventually("the leader's pod alone to be labelled", || async {
        (in_cluster::labelled_leaders(&client).await == [leader.clone()]).then_some(())
    })
    .await;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NAMESPACE);
    let service = ListParams::default().labels("kubernetes.io/service-name=tether-controller");
    eventually("the Service to reach the leader only", || async {
        let targets: Vec<String> = slices
            .list(&service)
            .await
            .ok()?
            .items
            .into_iter()
            .flat_map(|slice| slice.endpoints)
            .filter_map(|endpoint| endpoint.target_ref?.name)
            .collect();
        (targets == [leader.clone()]).then_some(())
    })
    .await;

    // An Application is synced by the in-cluster controller.
    let repo = Repo::at(&work.path().join("repo"));
    let first = repo.commit(&[("app/greeting.yaml", config_map("hello"))], "first");
    kubectl(&["create", "namespace", "shop"]);
    let apps = application("shop", "shop", &repo.url(), "app")
        .sync_policy(json!({"prune": true}))
        .apply(&client)
        .await;
    status_where(&apps, "Synced at the first commit", |status| {
        status.sync.status == SyncStatus::Synced && status.sync.revision.as_deref() == Some(&first)
    })
    .await;
    assert_eq!(greeting(), "hello");

    // kubectl logs shows the controller's log.
    let logs = kubectl(&["logs", "-n", NAMESPACE, &leader]);
    assert!(logs.contains("tether controller starting"), "{logs}");
    assert!(logs.contains("leading"), "{logs}");

    // Deleting the leader's pod hands over: the standby leads and syncs a
    // commit made at once, well within 10 s.
    let failover = in_cluster::fail_over(&client, ("shop", "shop"), || {
        repo.commit(&[("app/greeting.yaml", config_map("again"))], "second")
    })
    .await;
    eprintln!(
        "figure: leader pod deleted -> new leader {:.1?}, new commit synced {:.1?}",
        failover.new_leader, failover.synced
    );
    assert!(failover.synced < Duration::from_secs(10), "{failover:?}");
    assert_eq!(greeting(), "again");
    let new_leader = in_cluster::leader(&client).await.expect("a new leader");
    assert_ne!(new_leader, leader);
    eventually("the new leader's pod alone to be labelled", || async {
        (in_cluster::labelled_leaders(&client).await == [new_leader.clone()]).then_some(())
    })
    .await;
    // The Deployment replaces the deleted pod with a new standby.
    in_cluster::ready(&client, 2).await;

    // Upgrading to a new image rolls the replicas over one by one; the
    // Application stays Synced at its commit all along.
    let before = apps.get("shop").await.unwrap().status.unwrap();
    in_cluster::install(tether, admin, in_cluster::NEXT_IMAGE, &[]);
    let rolled = std::sync::atomic::AtomicBool::new(false);
    let rollout = async {
        let took = in_cluster::ready(&client, 2).await;
        rolled.store(true, std::sync::atomic::Ordering::SeqCst);
        took
    };
    let states = async {
        let mut seen = std::collections::BTreeSet::new();
        while !rolled.load(std::sync::atomic::Ordering::SeqCst) {
            let status = apps.get("shop").await.unwrap().status.unwrap();
            seen.insert((status.sync.status, status.health.status));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        seen
    };
    let (took, seen) = tokio::join!(rollout, states);
    eprintln!("figure: upgrade rollout to 2 ready replicas of the new image: {took:.1?}");
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        [(SyncStatus::Synced, before.health.status)],
        "the Application's state during the upgrade"
    );
    // Ready replicas leave out a pod that is shutting down; the last old
    // pod is listed until its controller has stopped and it is deleted.
    let images = || {
        kubectl(&[
            "get",
            "pods",
            "-n",
            NAMESPACE,
            "-o",
            "jsonpath={.items[*].spec.containers[0].image}",
        ])
    };
    eventually("only the two tether:next pods, the old ones gone", || {
        let listed = images();
        async move { (listed == "tether:next tether:next").then_some(()) }
    })
    .await;
    eventually("the new replicas to lead", || in_cluster::leader(&client)).await;
    let after = status_where(&apps, "Synced after the upgrade", |status| {
        status.sync.status == SyncStatus::Synced
    })
    .await;
    assert_eq!(after.sync.revision, before.sync.revision);
    assert_eq!(after.health.status, before.health.status);
    assert_eq!(after.resources, before.resources);

    // Uninstalling removes the controller and leaves the Application and
    // what it applied in place.
    run_ok(
        Command::new(tether)
            .args(["uninstall", "--namespace", NAMESPACE])
            .env("KUBECONFIG", admin),
    );
    let deployments = kubectl(&[
        "get",
        "deployments,services,poddisruptionbudgets",
        "-n",
        NAMESPACE,
        "-o",
        "name",
    ]);
    assert_eq!(deployments, "");
    assert_eq!(greeting(), "again");
    assert!(apps.get_opt("shop").await.unwrap().is_some());
}
