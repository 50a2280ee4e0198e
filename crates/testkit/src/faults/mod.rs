//! Fault scenarios: a controller running for one namespace, its API
//! traffic through a [`FaultProxy`] (and its Git traffic through a
//! [`TcpGate`]), a fault injected while the app is in use, and what it cost
//! to recover. Each scenario returns an [`Outcome`]; the controller's fault
//! tests run each once and assert on it, and `tether-bench faults` runs each
//! many times and prints the table.
//!
//! "Lost" is measured, not assumed: after recovery every object Git has
//! must be in the cluster with Git's values, the bystander (a ConfigMap in
//! the same namespace that Tether did not create) must still be there, and
//! the sync history must still hold every revision synced before.

mod process;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use tether_controller::api::{Application, ApplicationStatus};
use tether_controller::lease::LeaseError;
use tether_controller::run::RunError;
use tether_controller::{Config, install};
use tether_core::drift::FlapPolicy;
use tether_core::{ConditionStatus, SyncStatus};
use tokio_util::task::AbortOnDropHandle;

use crate::fault_proxy::{Fault, FaultProxy, TcpGate, Verb};
use crate::{Component, GitDaemon, Repo, TestNamespace, application, status_where};

pub use process::{DiskTrouble, crash, disk};

/// What one run of a scenario measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub scenario: &'static str,
    /// The app reached Git's latest commit, Synced, after the fault.
    pub converged: bool,
    /// From the end of the fault to Synced at the latest commit.
    pub to_converge: Duration,
    /// API requests from the end of the fault to convergence.
    pub requests_in_recovery: usize,
    /// LIST requests among them (a relist storm shows here).
    pub lists_in_recovery: usize,
    /// API requests per second while the fault lasted.
    pub rate_during_fault: f64,
    /// Objects of Git missing or with other values after recovery.
    pub objects_lost: usize,
    /// Objects Tether did not create that are gone.
    pub wrongly_deleted: usize,
    /// Revisions synced before the fault that the history no longer has.
    pub records_lost: usize,
    /// History entries or Events recorded twice for the same sync (the
    /// restart scenarios count them; 0 elsewhere).
    pub duplicates: usize,
    /// The fault was said where users look (a condition naming it) and
    /// the last good state held while it lasted; true where the scenario
    /// does not check it.
    pub said_and_held: bool,
    /// Anything else the scenario noticed, for the table's last column.
    pub note: String,
}

impl Outcome {
    /// Prints the outcome, then asserts that the app converged and that
    /// nothing was lost: no object of Git, no object Tether did not
    /// create, no synced revision.
    pub fn assert_nothing_lost(&self) {
        println!("{self:?}");
        assert!(self.converged, "did not converge: {self:?}");
        assert_eq!(self.objects_lost, 0, "{self:?}");
        assert_eq!(self.wrongly_deleted, 0, "{self:?}");
        assert_eq!(self.records_lost, 0, "{self:?}");
    }

    /// A run of `scenario` that converged at once and lost nothing, for a
    /// scenario to fill in what it measured.
    fn new(scenario: &'static str) -> Outcome {
        Outcome {
            scenario,
            converged: true,
            to_converge: Duration::ZERO,
            requests_in_recovery: 0,
            lists_in_recovery: 0,
            rate_during_fault: 0.0,
            objects_lost: 0,
            wrongly_deleted: 0,
            records_lost: 0,
            duplicates: 0,
            said_and_held: true,
            note: String::new(),
        }
    }
}

/// One namespace with the web app synced through a fault proxy.
struct Stage {
    /// First, so that the controller stops before the rest is dropped.
    _controller: AbortOnDropHandle<()>,
    ns: TestNamespace,
    repo: Repo,
    proxy: FaultProxy,
    apps: Api<Application>,
    _daemon: Option<(GitDaemon, TcpGate)>,
}

const BYSTANDER: &str = "bystander";

fn files(greeting: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "app/config.yaml",
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  greeting: \"{greeting}\"\n"
            ),
        ),
        (
            "app/web.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n".to_string(),
        ),
    ]
}

impl Stage {
    /// The app synced at a first commit; with `gated`, its repository is
    /// served by a Git daemon behind a [`TcpGate`] and polled every 2 s.
    async fn new(prefix: &str, gated: bool) -> Stage {
        let ns = TestNamespace::create(prefix).await;
        let repo = Repo::new();
        repo.commit(&files("one"), "one");
        let bystander: Api<ConfigMap> = ns.api();
        bystander
            .create(
                &PostParams::default(),
                &serde_json::from_value(
                    json!({"metadata": {"name": BYSTANDER}, "data": {"keep": "me"}}),
                )
                .expect("a ConfigMap"),
            )
            .await
            .expect("bystander created");
        crate::log_file();
        install::install(ns.client.clone(), &ns.name)
            .await
            .expect("installed");
        let proxy = FaultProxy::start(ns.client.clone()).await;
        let config = Config {
            resync: Duration::from_secs(30),
            cache_dir: ns.cache_dir(),
            lease_namespace: ns.name.clone(),
            identity: format!("faults-{}", ns.name),
            watch_namespace: Some(ns.name.clone()),
            // The scenarios scale the same field again and again to see
            // every change healed; the flap guard, which would rightly stop
            // fighting such a writer, is not what they measure.
            flap_policy: FlapPolicy {
                max_reverts: 1_000,
                ..FlapPolicy::default()
            },
            ..Config::default()
        };
        // The client as `tether run` builds it (its retry policy included).
        let client = tether_cluster::Connection::new(
            kube::Config::new(proxy.url().parse().expect("proxy URL")),
            None,
        )
        .client()
        .expect("client builds");
        // A controller that lost its Lease (the API server away longer than
        // the Lease lasts) stops, and its pod would start it again.
        let controller = tokio::spawn(async move {
            loop {
                match tether_controller::run(client.clone(), config.clone()).await {
                    Err(RunError::Lease(LeaseError::Lost)) => {
                        eprintln!("[faults] the controller lost its Lease; starting it again");
                    }
                    Err(error) => panic!("controller stopped: {error}"),
                    Ok(()) => return,
                }
            }
        });
        let (url, daemon) = if gated {
            let daemon = GitDaemon::start(&repo.publish("app"));
            let gate = TcpGate::start(daemon.port).await;
            (
                format!("git://127.0.0.1:{}/app.git", gate.port),
                Some((daemon, gate)),
            )
        } else {
            (repo.url(), None)
        };
        let apps = application("shop", &ns.name, &url, "app")
            .interval("2s")
            .apply(&ns.client)
            .await;
        let stage = Stage {
            _controller: AbortOnDropHandle::new(controller),
            ns,
            repo,
            proxy,
            apps,
            _daemon: daemon,
        };
        stage.synced_at_head("synced at the first commit").await;
        stage
    }

    fn head(&self) -> String {
        self.repo.head()
    }

    /// Commits `greeting`, publishing it when the repository is served.
    fn commit(&self, greeting: &str) {
        self.repo.commit(&files(greeting), greeting);
        if self._daemon.is_some() {
            self.repo.publish("app");
        }
    }

    fn gate(&self) -> &TcpGate {
        &self._daemon.as_ref().expect("a gated stage").1
    }

    /// The app's status as it is now.
    async fn status(&self) -> ApplicationStatus {
        self.apps
            .get("shop")
            .await
            .expect("the app")
            .status
            .unwrap_or_default()
    }

    async fn synced_at_head(&self, what: &str) -> ApplicationStatus {
        let head = self.head();
        status_where(&self.apps, what, move |s| {
            s.sync.status == SyncStatus::Synced && s.sync.revision.as_deref() == Some(head.as_str())
        })
        .await
    }

    /// Waits for convergence after the fault ended at `healed` and
    /// measures what was lost; `during` is the fault's own window.
    async fn outcome(
        &self,
        scenario: &'static str,
        during: (Instant, Instant),
        synced_before: &[String],
    ) -> Outcome {
        let healed = during.1;
        let status = tokio::time::timeout(
            crate::PATIENCE,
            self.synced_at_head("Synced at the latest commit after the fault"),
        )
        .await;
        let converged = status.is_ok();
        let to_converge = healed.elapsed();
        let after: Vec<_> = self.proxy.seen_since(healed);
        let fault_seen = self
            .proxy
            .seen()
            .into_iter()
            .filter(|s| s.at >= during.0 && s.at < during.1)
            .count();
        let fault_seconds = (during.1 - during.0).as_secs_f64().max(0.001);
        let status = match status {
            Ok(status) => status,
            Err(_) => self.status().await,
        };
        let history: Vec<&str> = status.history.iter().map(|h| h.revision.as_str()).collect();
        Outcome {
            scenario,
            converged,
            to_converge,
            requests_in_recovery: after.len(),
            lists_in_recovery: after.iter().filter(|s| s.verb == Verb::List).count(),
            rate_during_fault: fault_seen as f64 / fault_seconds,
            objects_lost: self.objects_lost().await,
            wrongly_deleted: usize::from(self.ns.get_opt::<ConfigMap>(BYSTANDER).await.is_none()),
            records_lost: synced_before
                .iter()
                .filter(|revision| !history.contains(&revision.as_str()))
                .count(),
            duplicates: 0,
            said_and_held: true,
            note: String::new(),
        }
    }

    /// History entries and Events about the app recorded more than once
    /// for the sync of `revision`: entries beyond the first with that
    /// revision, and repeats (Event objects, or a series' count) of an
    /// Event whose note names it.
    async fn duplicates(&self, revision: &str) -> usize {
        let status = self.status().await;
        let entries = status
            .history
            .iter()
            .filter(|h| h.revision == revision)
            .count();
        let events: Api<Event> = self.ns.api();
        let mut told: std::collections::HashMap<(String, String), usize> = Default::default();
        for event in events
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
        {
            let about_app = event
                .regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some("Application"));
            let note = event.note.clone().unwrap_or_default();
            if !about_app || !note.contains(revision) {
                continue;
            }
            let times = event
                .series
                .as_ref()
                .map_or(1, |series| series.count.max(1) as usize);
            *told
                .entry((event.reason.clone().unwrap_or_default(), note))
                .or_default() += times;
        }
        entries.saturating_sub(1) + told.values().map(|n| n - 1).sum::<usize>()
    }

    /// Git's objects missing from the cluster or with other values.
    async fn objects_lost(&self) -> usize {
        let greeting = self
            .repo
            .git(&["log", "-1", "--format=%s"])
            .trim()
            .to_string();
        let settings_right = self
            .ns
            .get_opt::<ConfigMap>("settings")
            .await
            .and_then(|cm| cm.data)
            .and_then(|data| data.get("greeting").cloned())
            .is_some_and(|value| value == greeting);
        let web_right = self
            .ns
            .get_opt::<Deployment>("web")
            .await
            .and_then(|d| d.spec)
            .and_then(|spec| spec.replicas)
            .is_some_and(|replicas| replicas == 2);
        usize::from(!settings_right) + usize::from(!web_right)
    }
}

/// The API server answers `code` (with `Retry-After: retry_after` when
/// set) to every request for `storm`, while a new commit waits to be
/// synced; then it recovers. Tether must back off as told, keep its
/// request rate bounded, and sync the commit once the storm ends.
pub async fn throttle_storm(code: u16, retry_after: Option<u64>, storm: Duration) -> Outcome {
    let stage = Stage::new("faults-throttle", false).await;
    let before = vec![stage.head()];
    stage.proxy.set(Fault::Status {
        code,
        retry_after,
        every: 1,
    });
    let start = Instant::now();
    stage.commit("two");
    tokio::time::sleep(storm).await;
    stage.proxy.clear();
    let end = Instant::now();
    let scenario = if code == 429 {
        "429 storm, Retry-After"
    } else {
        "503 storm"
    };
    stage.outcome(scenario, (start, end), &before).await
}

/// The API server is gone for `outage` (requests hang, watch streams
/// end), as during a restart, while a commit waits; then it is back.
/// Tether must resume from its watches without relisting everything in a
/// storm, and sync the commit.
pub async fn api_outage(outage: Duration) -> Outcome {
    let stage = Stage::new("faults-outage", false).await;
    let before = vec![stage.head()];
    stage.proxy.set(Fault::BlackHole);
    let start = Instant::now();
    stage.commit("two");
    tokio::time::sleep(outage).await;
    stage.proxy.clear();
    let end = Instant::now();
    stage
        .outcome("API server gone, then back", (start, end), &before)
        .await
}

/// The API server (or etcd) really restarts, keeping the cluster's data,
/// while a commit waits to be synced. Tether must resume its watches (a
/// relist at most once per watch, no storm), sync the commit once, record
/// it once in history and in Events, and still heal a change made after.
/// Restarts the control plane of this process: run it where no other test
/// shares it.
pub async fn restart(component: Component) -> Outcome {
    let stage = Stage::new("faults-restart", false).await;
    let before = vec![stage.head()];
    let start = Instant::now();
    let restarted = crate::control_plane().restart(component);
    // The commit lands once the cluster stops taking writes (reads may be
    // served from the API server's cache while etcd is down), so it waits
    // for the restart to end.
    let commit = async {
        let probes: Api<ConfigMap> = stage.ns.api();
        let down = async {
            for n in 0.. {
                let probe = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "restart-probe"}, "data": {"n": n.to_string()}});
                let params = kube::api::PatchParams::apply("restart-probe").force();
                let written = tokio::time::timeout(
                    Duration::from_secs(2),
                    probes.patch("restart-probe", &params, &kube::api::Patch::Apply(&probe)),
                )
                .await;
                if !matches!(written, Ok(Ok(_))) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        let _ = tokio::time::timeout(crate::PATIENCE, down).await;
        stage.commit("two");
        Instant::now()
    };
    let ((), down) = tokio::join!(restarted, commit);
    let end = Instant::now();
    let scenario = match component {
        Component::ApiServer => "API server restarted",
        Component::Etcd => "etcd restarted",
    };
    let mut outcome = stage.outcome(scenario, (start, end), &before).await;
    // Recovery began when the cluster went down: the watches resumed (or
    // relisted) as soon as it was back, maybe before the restart ended.
    let recovery = stage.proxy.seen_since(down);
    outcome.requests_in_recovery = recovery.len();
    outcome.lists_in_recovery = recovery.iter().filter(|s| s.verb == Verb::List).count();
    outcome.duplicates = stage.duplicates(&stage.head()).await;
    // The watches resumed: a scale behind Git's back is healed.
    let scaled = Instant::now();
    stage
        .ns
        .kubectl_ok(&["scale", "deployment/web", "--replicas=5"]);
    let healed = tokio::time::timeout(crate::PATIENCE / 2, async {
        while stage.ns.jsonpath("deployment/web", "{.spec.replicas}") != "2" {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .is_ok();
    outcome.objects_lost += usize::from(!healed);
    outcome.note = format!(
        "down for {:?} of a {:?} restart; a scale after it healed in {:?}",
        end - down,
        end - start,
        scaled.elapsed()
    );
    outcome
}

/// For `period`, the watch streams are cut every `every` while someone
/// scales the Deployment behind Git's back after each cut: every scale
/// must be healed (none missed because its event fell between streams).
pub async fn watch_cuts(period: Duration, every: Duration) -> Outcome {
    let stage = Stage::new("faults-cuts", false).await;
    let before = vec![stage.head()];
    let start = Instant::now();
    let (mut scales, mut healed) = (0, 0);
    let mut slowest = Duration::ZERO;
    while start.elapsed() < period {
        stage.proxy.cut_watches();
        scales += 1;
        let replicas = 3 + scales % 4;
        let scaled = Instant::now();
        stage
            .ns
            .kubectl_ok(&["scale", "deployment/web", &format!("--replicas={replicas}")]);
        let deadline = scaled + crate::PATIENCE / 2;
        loop {
            if stage.ns.jsonpath("deployment/web", "{.spec.replicas}") == "2" {
                healed += 1;
                slowest = slowest.max(scaled.elapsed());
                break;
            }
            if Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(every.saturating_sub(scaled.elapsed())).await;
    }
    stage.commit("two");
    let end = Instant::now();
    let mut outcome = stage
        .outcome("watch streams cut", (start, end), &before)
        .await;
    outcome.objects_lost += scales - healed;
    outcome.note = format!("{healed}/{scales} scales healed, the slowest in {slowest:?}");
    outcome
}

/// The Git server is down for `outage` while a commit waits to be
/// published to it: Tether keeps the last good state, says the source is
/// unreachable, backs off, and syncs the commit within one fetch after the
/// server is back.
pub async fn git_outage(outage: Duration) -> Outcome {
    let stage = Stage::new("faults-git", true).await;
    let before = vec![stage.head()];
    stage.gate().close();
    let start = Instant::now();
    stage.commit("two");
    let reported = tokio::time::timeout(
        outage,
        status_where(&stage.apps, "the source reported unreachable", |s| {
            s.conditions
                .iter()
                .any(|c| c.status == ConditionStatus::False && c.message.contains("127.0.0.1"))
        }),
    )
    .await
    .is_ok();
    let remaining = outage.saturating_sub(start.elapsed());
    tokio::time::sleep(remaining).await;
    let attempts_during = stage
        .gate()
        .attempts()
        .iter()
        .filter(|at| **at >= start)
        .count();
    let kept = stage.status().await;
    stage.gate().open();
    let end = Instant::now();
    let mut outcome = stage
        .outcome("Git server down", (start, end), &before)
        .await;
    let last_good_kept = kept.sync.revision.as_deref() == Some(before[0].as_str());
    outcome.note = format!(
        "{attempts_during} fetches during {:?}; unreachable reported: {reported}; last good state kept: {last_good_kept}",
        outage
    );
    outcome.said_and_held = reported && last_good_kept;
    outcome
}
