//! Two real `tether run` processes against one control plane, with the
//! same `--lease-namespace`: only the Lease holder reconciles (every change
//! is applied once, every event is signed by it); SIGKILL it and the other
//! takes over within the lease duration and applies the next commit.

mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::json;
use support::{
    Repo, Running, config_map, create_app, run_controller, settings_repo_greeting, tether_ok,
};
use tether_controller::api::Application;
use tether_testkit::TestNamespace;
use tether_testkit::eventually;

/// The controller's lease (15 s) plus its grace (5 s), and some slack for
/// a shared two-core machine.
const TAKEOVER_LIMIT: Duration = Duration::from_secs(30);

struct Cluster {
    ns: TestNamespace,
    apps: Api<Application>,
    config_maps: Api<ConfigMap>,
    leases: Api<Lease>,
}

impl Cluster {
    async fn holder(&self) -> Option<String> {
        self.leases
            .get_opt("tether-controller")
            .await
            .ok()??
            .spec?
            .holder_identity
    }

    /// Waits until `settings` says `greeting` and the app is at `commit`.
    async fn applied(&self, commit: &str, greeting: &str) {
        eventually(&format!("{greeting} applied at {commit}"), || async {
            let live = self.config_maps.get_opt("settings").await.ok()??;
            let status = self.apps.get("shop").await.ok()?.status?;
            (live.data?.get("greeting")? == greeting
                && status.sync.revision.as_deref() == Some(commit))
            .then_some(())
        })
        .await;
    }

    /// How many recorded syncs went to `commit`.
    async fn syncs_to(&self, commit: &str) -> usize {
        let status = self.apps.get("shop").await.unwrap().status.unwrap();
        status
            .history
            .iter()
            .filter(|h| h.revision == commit)
            .count()
    }

    /// The replicas that signed the Application's events.
    async fn reporters(&self) -> BTreeSet<String> {
        Api::<Event>::namespaced(self.ns.client.clone(), &self.ns.name)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("shop"))
            .filter_map(|e| e.reporting_instance)
            .collect()
    }
}

/// Tether installed in a new namespace, app `shop` at commit `first` of
/// `repo`, and two `tether run` replicas, `alpha` and `beta`.
async fn two_replicas(prefix: &str) -> (Cluster, Repo, String, Running, Running) {
    let ns = TestNamespace::create(prefix).await;
    tether_ok(&ns, &["install", "--namespace", &ns.name]);
    let (repo, first) = settings_repo_greeting("one");
    create_app(&ns, &repo, json!({}));
    let alpha = run_controller(&ns, "alpha");
    let beta = run_controller(&ns, "beta");
    let cluster = Cluster {
        apps: Api::namespaced(ns.client.clone(), &ns.name),
        config_maps: Api::namespaced(ns.client.clone(), &ns.name),
        leases: Api::namespaced(ns.client.clone(), &ns.name),
        ns,
    };
    (cluster, repo, first, alpha, beta)
}

#[tokio::test(flavor = "multi_thread")]
async fn of_two_tether_run_processes_only_the_leader_acts_and_the_other_takes_over_when_it_is_killed()
 {
    let (cluster, repo, first, mut alpha, mut beta) = two_replicas("cli-leader").await;

    // One of them leads, and it alone applies and reports.
    let leader = eventually("a lease holder", || cluster.holder()).await;
    cluster.applied(&first, "one").await;
    let second = repo.commit(
        &[("app/settings.yaml", config_map("settings", "two"))],
        "two",
    );
    cluster.applied(&second, "two").await;
    // A few resyncs later, still exactly one sync per commit.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(cluster.syncs_to(&first).await, 1);
    assert_eq!(cluster.syncs_to(&second).await, 1);
    assert_eq!(cluster.reporters().await, BTreeSet::from([leader.clone()]));
    assert_eq!(cluster.holder().await.as_deref(), Some(leader.as_str()));

    // SIGKILL the leader: the other takes over and applies the next commit.
    let (dead, survivor) = if leader == "alpha" {
        (&mut alpha, "beta")
    } else {
        (&mut beta, "alpha")
    };
    dead.kill();
    let killed = Instant::now();
    let third = repo.commit(
        &[("app/settings.yaml", config_map("settings", "three"))],
        "three",
    );
    eventually("the survivor holding the lease", || async {
        (cluster.holder().await.as_deref() == Some(survivor)).then_some(())
    })
    .await;
    let took_over = killed.elapsed();
    assert!(took_over < TAKEOVER_LIMIT, "took over after {took_over:?}");
    cluster.applied(&third, "three").await;
    println!(
        "takeover after SIGKILL: {:.1} s; next commit applied after {:.1} s",
        took_over.as_secs_f64(),
        killed.elapsed().as_secs_f64()
    );
    assert_eq!(cluster.syncs_to(&third).await, 1);
    assert_eq!(
        cluster.reporters().await,
        BTreeSet::from([leader, survivor.to_string()])
    );
    drop((alpha, beta));
}

/// A leader stopped with SIGTERM (a deleted pod) gives the Lease back as
/// it exits, so the other replica leads at once, not after the lease
/// duration.
#[tokio::test(flavor = "multi_thread")]
async fn a_leader_stopped_with_sigterm_gives_the_lease_back_and_the_other_leads_at_once() {
    let (cluster, repo, first, mut alpha, mut beta) = two_replicas("cli-sigterm").await;
    let leader = eventually("a lease holder", || cluster.holder()).await;
    cluster.applied(&first, "one").await;
    let (stopping, survivor) = if leader == "alpha" {
        (&mut alpha, "beta")
    } else {
        (&mut beta, "alpha")
    };
    let pid = stopping.child.id().to_string();
    let terminated = Instant::now();
    tether_testkit::run_ok(std::process::Command::new("kill").args(["-TERM", &pid]));
    eventually("the survivor holding the lease", || async {
        (cluster.holder().await.as_deref() == Some(survivor)).then_some(())
    })
    .await;
    let took_over = terminated.elapsed();
    let mut exit = None;
    for _ in 0..100 {
        exit = stopping.child.try_wait().unwrap();
        if exit.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let exit = exit.expect("the stopped leader exits within 10 s");
    assert!(exit.success(), "{exit:?}");
    let second = repo.commit(
        &[("app/settings.yaml", config_map("settings", "two"))],
        "two",
    );
    cluster.applied(&second, "two").await;
    println!(
        "takeover after SIGTERM: {:.1} s; next commit applied after {:.1} s",
        took_over.as_secs_f64(),
        terminated.elapsed().as_secs_f64()
    );
    assert!(
        took_over < Duration::from_secs(5),
        "took over after {took_over:?}"
    );
    drop((alpha, beta));
}
