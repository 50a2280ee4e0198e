//! One Tether, three clusters: the one it runs in (the tests' shared
//! control plane) and two more kube-local instances registered with
//! `tether cluster add`. Thirty apps spread over them converge; when one
//! cluster's API server goes away only its apps go Unknown, saying which
//! cluster and why, while drift on the others is healed as fast as before;
//! when it comes back its apps converge with one list per watch, not a
//! resync storm.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use support::{
    audited_plane, config_map, converged, hijack_until_healed, installed, run_controller, tether_ok,
};
use tether_controller::api::{Application, ApplicationStatus};
use tether_core::{HealthStatus, SyncStatus};
use tether_testkit::{
    Component, ControlPlane, Repo, TestNamespace, application, client_for, condition, eventually,
    status_where,
};

const APPS: usize = 30;
/// Where the apps on the registered clusters put their objects.
const REMOTE_NAMESPACE: &str = "shop";
/// The user Tether acts as on a registered cluster.
const MANAGER: &str = "system:serviceaccount:kube-system:tether-manager";

/// The cluster app `i` deploys to: the local one, `b` or `c`.
fn cluster_of(i: usize) -> Option<&'static str> {
    [None, Some("b"), Some("c")][i % 3]
}

struct Remote {
    name: &'static str,
    plane: &'static ControlPlane,
    audit_log: &'static Path,
    /// An administrator in the break-glass group: the single-writer
    /// policy on c lets its edits through, and self-heal reverts them.
    client: kube::Client,
}

/// The two registered clusters, started once for the tests of this file
/// (each test registers them in its own namespace). `b` is the one the
/// outage test stops; the others use `c`.
fn planes() -> &'static [(ControlPlane, PathBuf); 2] {
    static PLANES: std::sync::OnceLock<[(ControlPlane, PathBuf); 2]> = std::sync::OnceLock::new();
    PLANES.get_or_init(|| {
        let b = std::thread::spawn(|| audited_plane("cluster-b"));
        let c = audited_plane("cluster-c");
        [b.join().unwrap(), c]
    })
}

async fn remote(
    name: &'static str,
    (plane, audit_log): &'static (ControlPlane, PathBuf),
) -> Remote {
    let operator = plane.user_kubeconfig("operator", &["system:masters", "tether:break-glass"]);
    let client = client_for(&operator).await;
    Remote {
        name,
        plane,
        audit_log,
        client,
    }
}

fn app_files(i: usize) -> (String, String) {
    (
        format!("apps/app-{i}/settings.yaml"),
        config_map(&format!("settings-{i}"), "hello"),
    )
}

async fn status(apps: &Api<Application>, i: usize) -> Option<ApplicationStatus> {
    apps.get(&format!("app-{i}")).await.ok()?.status
}

/// Waits until `check` holds of the status of each app `i` that `which`
/// picks.
async fn each_app(
    apps: &Api<Application>,
    what: &str,
    which: impl Fn(usize) -> bool,
    check: impl Fn(&ApplicationStatus) -> bool,
) {
    eventually(what, || async {
        for i in (0..APPS).filter(|&i| which(i)) {
            if !check(&status(apps, i).await?) {
                return None;
            }
        }
        Some(())
    })
    .await;
}

/// Whether app `i` deploys to cluster `b`.
fn on_b(i: usize) -> bool {
    cluster_of(i) == Some("b")
}

/// The ConfigMap app `i` deploys, on its cluster.
fn config_maps(i: usize, ns: &TestNamespace, remotes: &[Remote]) -> Api<ConfigMap> {
    match cluster_of(i) {
        None => Api::namespaced(ns.client.clone(), &ns.name),
        Some(name) => {
            let remote = remotes.iter().find(|r| r.name == name).unwrap();
            Api::namespaced(remote.client.clone(), REMOTE_NAMESPACE)
        }
    }
}

/// Changes app `i`'s ConfigMap behind Git's back and times the heal.
async fn drift_healed_in(i: usize, ns: &TestNamespace, remotes: &[Remote]) -> Duration {
    let api = config_maps(i, ns, remotes);
    let name = format!("settings-{i}");
    let began = Instant::now();
    hijack_until_healed(&api, &name, "").await;
    began.elapsed()
}

fn p99(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[(times.len() * 99).div_ceil(100) - 1]
}

/// Requests Tether made to a registered cluster since `since` (RFC 3339):
/// (all, lists).
fn manager_requests(audit_log: &Path, since: &str) -> (usize, usize) {
    let text = std::fs::read_to_string(audit_log).unwrap_or_default();
    let mut all = 0;
    let mut lists = 0;
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if event["stage"] != "ResponseComplete"
            || event["user"]["username"] != MANAGER
            || event["requestReceivedTimestamp"].as_str().unwrap_or("") < since
        {
            continue;
        }
        all += 1;
        if event["verb"] == "list" {
            lists += 1;
        }
    }
    (all, lists)
}

/// Tether installed in a new namespace, with `b` and `c` registered
/// there (`c` with the single-writer policy).
async fn registered(prefix: &str) -> (TestNamespace, Vec<Remote>) {
    let planes = std::thread::spawn(planes);
    let ns = installed(prefix).await;
    let [b, c] = planes.join().unwrap();
    let remotes = vec![remote("b", b).await, remote("c", c).await];
    for remote in &remotes {
        let kubeconfig = remote.plane.kubeconfig().to_str().unwrap();
        let mut add = vec![
            "cluster",
            "add",
            remote.name,
            "-n",
            &ns.name,
            "--kubeconfig",
            kubeconfig,
        ];
        if remote.name == "c" {
            add.push("--enforce-single-writer");
        }
        let added = tether_ok(&ns, &add);
        assert!(
            added.contains(&format!(
                "cluster {} added: https://127.0.0.1:",
                remote.name
            )),
            "{added}"
        );
    }
    (ns, remotes)
}

#[tokio::test(flavor = "multi_thread")]
async fn thirty_apps_on_three_clusters_converge_and_an_outage_stays_with_its_cluster() {
    let (ns, remotes) = registered("clusters").await;

    // Thirty apps of one repository, a third on each cluster.
    let repo = Repo::new();
    let files: Vec<(String, String)> = (0..APPS).map(app_files).collect();
    repo.commit(&files, "thirty apps");
    for i in 0..APPS {
        let app = application(
            &format!("app-{i}"),
            &ns.name,
            &repo.url(),
            &format!("apps/app-{i}"),
        );
        let app = match cluster_of(i) {
            None => app,
            Some(cluster) => app
                .cluster(cluster)
                .destination(REMOTE_NAMESPACE)
                .sync_policy(json!({"createNamespace": true})),
        };
        app.apply(&ns.client).await;
    }
    let _controller = run_controller(&ns, "multi-cluster");
    let apps: Api<Application> = ns.api();
    each_app(
        &apps,
        "all thirty apps Synced and Healthy",
        |_| true,
        converged,
    )
    .await;
    let listed = tether_ok(&ns, &["cluster", "list", "-n", &ns.name]);
    for name in ["b", "c"] {
        let line = listed
            .lines()
            .find(|line| line.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("cluster {name} not listed:\n{listed}"));
        // Ten of this test's apps (the other test's app may count too).
        let count: usize = line.split_whitespace().last().unwrap().parse().unwrap();
        assert!(line.contains(" yes ") && count >= 10, "{listed}");
    }
    // Each registered cluster got its apps' objects, from Tether's account there.
    for (i, remote) in [(1, &remotes[0]), (2, &remotes[1])] {
        let live = config_maps(i, &ns, &remotes)
            .get(&format!("settings-{i}"))
            .await
            .unwrap();
        assert_eq!(
            live.data.unwrap()["greeting"],
            "hello",
            "on {}",
            remote.name
        );
    }
    // The single-writer policy on c refuses its administrator's edit.
    let refused = std::process::Command::new("kubectl")
        .args([
            "--kubeconfig",
            remotes[1].plane.kubeconfig().to_str().unwrap(),
        ])
        .args([
            "-n",
            REMOTE_NAMESPACE,
            "label",
            "configmap/settings-2",
            "edited=by-hand",
        ])
        .output()
        .unwrap();
    assert!(
        !refused.status.success()
            && String::from_utf8_lossy(&refused.stderr).contains("managed by Tether"),
        "{refused:?}"
    );

    // Drift on the local cluster and on c, healed: before the outage…
    let others: Vec<usize> = (0..APPS).filter(|i| cluster_of(*i) != Some("b")).collect();
    let mut before = Vec::new();
    for &i in others.iter().take(8) {
        before.push(drift_healed_in(i, &ns, &remotes).await);
    }
    // …and while b's API server is away.
    let b = &remotes[0];
    let restarts = b
        .plane
        .outage(Component::ApiServer, Duration::from_secs(30));
    let went = Instant::now();
    each_app(
        &apps,
        "b's apps Unknown, naming cluster b",
        on_b,
        |status| {
            let says = condition(status, "Reconciled").is_some_and(|reconciled| {
                reconciled.reason == "ClusterUnreachable"
                    && reconciled.message.contains("cluster b (https://127.0.0.1:")
            });
            let unknown = status.sync.status == SyncStatus::Unknown
                && status.health.status == HealthStatus::Unknown;
            says && unknown
        },
    )
    .await;
    println!(
        "b's apps Unknown {:.1} s after its API server stopped",
        went.elapsed().as_secs_f64()
    );
    let mut during = Vec::new();
    for &i in others.iter().skip(8).take(8) {
        during.push(drift_healed_in(i, &ns, &remotes).await);
        // The others stay converged meanwhile.
    }
    for &i in &others {
        let status = status(&apps, i).await.unwrap();
        assert!(converged(&status), "app-{i} during b's outage: {status:?}");
    }
    let (before, during) = (p99(before), p99(during));
    println!("drift healed p99: before the outage {before:?}, during it {during:?}");
    assert!(
        during <= before * 3 + Duration::from_millis(500),
        "other clusters' drift slowed by b's outage: p99 {before:?} → {during:?}"
    );

    // b comes back: its apps converge, with a list per watch, not a storm.
    let back_at = k8s_openapi::jiff::Timestamp::now().to_string();
    b.plane.wait_restarted(restarts).await;
    let back = Instant::now();
    each_app(&apps, "b's apps converged again", on_b, converged).await;
    println!(
        "b's apps converged {:.1} s after it was back",
        back.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (requests, lists) = manager_requests(b.audit_log, &back_at);
    println!("requests to b after it came back: {requests}, of which lists: {lists}");
    assert!(
        lists <= 4,
        "a resync storm on b: {lists} lists ({requests} requests)"
    );
    assert!(
        requests <= 10 * APPS,
        "{requests} requests to b after it came back"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn on_a_registered_cluster_drift_is_attributed_a_window_holds_and_prune_takes_only_its_own() {
    let (ns, remotes) = registered("cluster-c").await;
    let c = &remotes[1];
    // A namespace of this test's own on c, which both tests use.
    let target = format!("{}-c", ns.name);
    let repo = Repo::new();
    repo.commit(
        &[
            ("app/settings.yaml", config_map("settings", "hello")),
            ("app/extra.yaml", config_map("extra", "hello")),
        ],
        "two ConfigMaps",
    );
    application("shop", &ns.name, &repo.url(), "app")
        .cluster("c")
        .destination(&target)
        .sync_policy(json!({"createNamespace": true, "prune": true}))
        .apply(&ns.client)
        .await;
    let _controller = run_controller(&ns, "cluster-c");
    let apps: Api<Application> = ns.api();
    status_where(&apps, "shop Synced and Healthy on c", converged).await;
    let config_maps: Api<ConfigMap> = Api::namespaced(c.client.clone(), &target);
    // `tether diff` compares with c, not with the cluster Tether runs in.
    let same = support::tether(&ns, &["diff", "shop", "-n", &ns.name]);
    assert_eq!(same.status.code(), Some(0), "{}", support::text(&same));

    // A hand edit on c: reverted, and attributed to its writer there.
    config_maps
        .patch(
            "settings",
            &PatchParams::apply("operator-edit").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings"}, "data": {"greeting": "by hand"}})),
        )
        .await
        .unwrap();
    status_where(
        &apps,
        "the hand edit on c recorded with its writer",
        |status| {
            // Healed at once, so among the resolved records.
            status.drift.iter().chain(&status.last_drift).any(|entry| {
                entry.record.object.name == "settings"
                    && entry.record.fields.iter().any(|field| {
                        field
                            .writer
                            .as_ref()
                            .is_some_and(|writer| writer.manager == "operator-edit")
                    })
            })
        },
    )
    .await;
    eventually("the hand edit on c reverted", || async {
        let live = config_maps.get("settings").await.ok()?;
        (live.data?.get("greeting")? == "hello").then_some(())
    })
    .await;

    // Inside a break-glass window on the ConfigMap the edit stays, as Emergency.
    let opened = tether_ok(
        &ns,
        &[
            "break-glass",
            "open",
            "shop",
            "-n",
            &ns.name,
            "--resource",
            "ConfigMap/settings",
            "--reason",
            "INC-7 on cluster c",
            "--ttl",
            "10m",
        ],
    );
    // Printed as `opened NS/NAME …`.
    let window = opened
        .split_whitespace()
        .nth(1)
        .and_then(|window| window.split('/').nth(1))
        .unwrap_or_else(|| panic!("no window in {opened:?}"))
        .to_string();
    eventually("the window Open", || async {
        let shown = tether_ok(&ns, &["break-glass", "show", &window, "-n", &ns.name]);
        shown.contains("Open").then_some(())
    })
    .await;
    let patch = json!({"data": {"greeting": "in the window"}});
    config_maps
        .patch("settings", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    status_where(&apps, "the edit on c recorded as Emergency", |status| {
        status.drift.iter().any(|entry| {
            entry.record.object.name == "settings"
                && entry.record.kind == tether_core::drift::DriftKind::Emergency
        })
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let live = config_maps.get("settings").await.unwrap();
    assert_eq!(
        live.data.unwrap()["greeting"],
        "in the window",
        "reverted inside the window"
    );

    // Closed with `--resolve revert`: Git's value comes back on c.
    tether_ok(
        &ns,
        &[
            "break-glass",
            "close",
            &window,
            "-n",
            &ns.name,
            "--resolve",
            "revert",
        ],
    );
    eventually("the window's change on c reverted once closed", || async {
        let live = config_maps.get("settings").await.ok()?;
        (live.data?.get("greeting")? == "hello").then_some(())
    })
    .await;

    // Prune on c deletes what Git dropped, and never what Tether did not make.
    let by_hand: ConfigMap =
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "made-by-hand"}, "data": {"k": "v"}}))
        .unwrap();
    config_maps
        .create(&Default::default(), &by_hand)
        .await
        .unwrap();
    repo.git(&["rm", "-q", "app/extra.yaml"]);
    repo.commit_all("drop extra");
    eventually("extra pruned on c", || async {
        config_maps
            .get_opt("extra")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(config_maps.get_opt("made-by-hand").await.unwrap().is_some());
    assert!(config_maps.get_opt("settings").await.unwrap().is_some());
}
