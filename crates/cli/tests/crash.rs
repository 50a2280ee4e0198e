//! `kill -9` of `tether run` at an arbitrary moment of a 200-object sync:
//! the controller started again converges to the commit, with every object
//! at that commit (none left at the one before), the operation not stuck
//! at Running, and the sync recorded in the history. `tether-bench
//! --faults` is where the long form belongs; this runs a few kills.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use support::{installed, run_controller_resyncing};
use tether_controller::api::Application;
use tether_core::OperationPhase;
use tether_testkit::{Repo, application, status_where};

const OBJECTS: usize = 200;
const KILLS: u64 = 3;

fn objects(revision: &str) -> Vec<(String, String)> {
    (0..OBJECTS)
        .map(|n| {
            (
                format!("app/cm-{n:03}.yaml"),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{n:03}\ndata:\n  revision: \"{revision}\"\n"
                ),
            )
        })
        .collect()
}

/// A pause in 0..1500 ms, different per kill (no clock-seeded randomness:
/// a failure must be reproducible).
fn pause(kill: u64) -> Duration {
    Duration::from_millis((kill * 7919 + 311) % 1500)
}

#[tokio::test]
async fn a_controller_killed_mid_sync_converges_every_object_to_the_commit_once_started_again() {
    let ns = installed("crash").await;
    let repo = Repo::new();
    repo.commit(&objects("r0"), "r0");
    let apps: Api<Application> = ns.api();
    application("shop", &ns.name, &repo.url(), "app")
        .interval("1s")
        .apply(&ns.client)
        .await;
    let mut controller = run_controller_resyncing(&ns, "crash", 30);
    let head = repo.head();
    status_where(&apps, "Synced at the first commit", move |s| {
        s.sync.status.as_str() == "Synced" && s.sync.revision.as_deref() == Some(head.as_str())
    })
    .await;
    for kill in 1..=KILLS {
        let revision = format!("r{kill}");
        repo.commit(&objects(&revision), &revision);
        let head = repo.head();
        tokio::time::sleep(pause(kill)).await;
        controller.kill();
        let killed = Instant::now();
        controller = run_controller_resyncing(&ns, "crash", 30);
        let expected = head.clone();
        let status = status_where(&apps, "Synced at the new commit after the kill", move |s| {
            s.sync.status.as_str() == "Synced"
                && s.sync.revision.as_deref() == Some(expected.as_str())
        })
        .await;
        println!(
            "kill {kill} after {:?}: converged {:?} after the kill",
            pause(kill),
            killed.elapsed()
        );
        let operation = status.operation_state.expect("an operation");
        assert_ne!(operation.phase, OperationPhase::Running, "{operation:?}");
        assert!(
            status.history.iter().any(|h| h.revision == head),
            "the sync of {head} is in the history: {:?}",
            status.history
        );
        let configmaps: Vec<ConfigMap> = ns.list().await;
        let behind: Vec<String> = configmaps
            .iter()
            .filter(|cm| {
                cm.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("cm-"))
            })
            .filter(|cm| {
                cm.data
                    .as_ref()
                    .and_then(|d| d.get("revision"))
                    .is_none_or(|r| *r != revision)
            })
            .filter_map(|cm| cm.metadata.name.clone())
            .collect();
        assert!(
            behind.is_empty(),
            "objects not at {revision} after converging: {behind:?}"
        );
    }
}
