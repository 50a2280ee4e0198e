//! Tether's controller running in the cluster it manages, as users run it:
//! `tether install --image tether:dev` on a control plane whose kubelet
//! really runs that image as this build's `tether` binary (kube-local's
//! exec kubelet: a process per container in its own mount and network
//! namespaces, with its ServiceAccount's token where Kubernetes mounts it).
//! For the tests and the benchmark's failover figures.
//!
//! The pods mount an emptyDir at `/tmp`, hiding the host's: repositories
//! they read live under [`workspace`] instead.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use kube::{Client, ResourceExt};
use tether_controller::api::Application;
use tether_controller::install::SERVICE_ACCOUNT;
use tether_controller::lease::{LEADER_LABEL, LEASE_NAME};
use tether_core::SyncStatus;

use crate::plane::{ControlPlane, Launch};
use crate::run::run_ok;
use crate::wait::eventually;

/// The image the exec kubelet runs as the `tether` binary.
pub const IMAGE: &str = "tether:dev";
/// Another tag of the same binary, to upgrade to.
pub const NEXT_IMAGE: &str = "tether:next";
/// The controller's namespace.
pub const NAMESPACE: &str = "tether-system";

/// A new directory outside `/tmp` (which the controller's pods do not
/// see), under `base` (e.g. `env!("CARGO_TARGET_TMPDIR")`), or under
/// `/var/tmp` when `base` is itself under `/tmp` (a clone there).
pub fn workspace(base: &Path) -> tempfile::TempDir {
    std::fs::create_dir_all(base).expect("the workspace's parent");
    let base = base.canonicalize().expect("the workspace's parent");
    let base = match base.starts_with("/tmp") {
        true => Path::new("/var/tmp").join("tether-in-cluster"),
        false => base,
    };
    std::fs::create_dir_all(&base).expect("the workspace's parent");
    tempfile::Builder::new()
        .prefix("in-cluster-")
        .tempdir_in(base)
        .expect("a workspace")
}

/// A control plane in `dir` (with kube-controller-manager, so Deployments
/// make pods) whose kubelet runs [`IMAGE`] and [`NEXT_IMAGE`] as `tether`.
pub fn plane(dir: &Path, tether: &Path) -> ControlPlane {
    ControlPlane::start(
        dir,
        &Launch {
            controller_manager: true,
            show_stderr: true,
            exec_images: vec![
                (IMAGE.into(), tether.to_path_buf()),
                (NEXT_IMAGE.into(), tether.to_path_buf()),
            ],
            ..Launch::default()
        },
    )
}

/// `tether install --image IMAGE ARGS` as the cluster's admin; its output.
pub fn install(tether: &Path, kubeconfig: &Path, image: &str, args: &[&str]) -> String {
    run_ok(
        Command::new(tether)
            .args(["install", "--namespace", NAMESPACE, "--image", image])
            .args(args)
            .env("KUBECONFIG", kubeconfig),
    )
}

/// Waits until the controller's Deployment has `replicas` ready replicas
/// of its current template and no other; returns how long that took.
pub async fn ready(client: &Client, replicas: i32) -> Duration {
    let started = Instant::now();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    eventually(&format!("{replicas} ready controller replicas"), || async {
        let deployment = deployments.get(SERVICE_ACCOUNT).await.ok()?;
        let status = deployment.status?;
        let current = status.observed_generation == deployment.metadata.generation;
        (current
            && status.ready_replicas == Some(replicas)
            && status.updated_replicas == Some(replicas)
            && status.replicas == Some(replicas))
        .then_some(())
    })
    .await;
    started.elapsed()
}

/// The Lease's holder, a pod's name.
pub async fn leader(client: &Client) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    leases
        .get(LEASE_NAME)
        .await
        .ok()?
        .spec?
        .holder_identity
        .filter(|holder| !holder.is_empty())
}

/// The controller's pods labelled as leading.
pub async fn labelled_leaders(client: &Client) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let selector = format!("{LEADER_LABEL}=true");
    let listed = pods
        .list(&kube::api::ListParams::default().labels(&selector))
        .await
        .expect("listing the controller's pods");
    listed
        .items
        .iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .map(|pod| pod.name_any())
        .collect()
}

/// What one failover took, from the leader pod's deletion.
#[derive(Debug, Clone, Copy)]
pub struct Failover {
    /// Until another pod held the Lease.
    pub new_leader: Duration,
    /// Until the Application was synced at the commit made right after the
    /// deletion.
    pub synced: Duration,
}

/// Deletes the leading pod (as `kubectl delete pod` does: its containers
/// get SIGTERM and the grace period), commits with `commit` at once, and
/// measures how long until another pod leads and until Application
/// `namespace/name` is Synced at that commit.
pub async fn fail_over(
    client: &Client,
    app: (&str, &str),
    commit: impl FnOnce() -> String,
) -> Failover {
    let old = eventually("a leader", || leader(client)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let deleted = Instant::now();
    pods.delete(&old, &DeleteParams::default())
        .await
        .unwrap_or_else(|error| panic!("deleting the leader pod {old}: {error}"));
    let revision = commit();
    let new_leader = eventually("another pod to lead", || async {
        let holder = leader(client).await?;
        (holder != old).then(|| deleted.elapsed())
    })
    .await;
    let apps: Api<Application> = Api::namespaced(client.clone(), app.0);
    let synced = eventually(
        &format!("Application {}/{} synced at {revision}", app.0, app.1),
        || async {
            let status = apps.get(app.1).await.ok()?.status?;
            let sync = status.sync;
            (sync.revision.as_deref() == Some(revision.as_str())
                && sync.status == SyncStatus::Synced)
                .then(|| deleted.elapsed())
        },
    )
    .await;
    Failover { new_leader, synced }
}

/// The median of `durations`.
pub fn median(durations: &mut [Duration]) -> Duration {
    durations.sort();
    durations[durations.len() / 2]
}
