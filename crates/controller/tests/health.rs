//! Health on the real local control plane: kube-controller-manager runs the
//! workloads and the fake kubelet plays the node (the image
//! `tether.test/crashloop` crash-loops, `tether.test/badimage` cannot be
//! pulled, `tether.test/fail` fails), so every health here is computed from
//! objects the real controllers wrote.
//!
//! The controller runs with a one-hour safety-net resync (except where a
//! new Git commit must be noticed), so each health change below reached
//! the Application's status through a watch event, not a periodic re-read.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tether_core::ConditionStatus;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use support::{
    Repo, config_for, create_app, start_controller, start_controller_with, status_where,
};
use tether_controller::api::application::HealthInfo;
use tether_controller::api::{Application, ApplicationStatus};
use tether_controller::observe::health::RULES_CONFIGMAP;
use tether_controller::watch_retry::Retrying;
use tether_testkit::{TestNamespace, assert_starts_with, eventually, has_condition};

/// One test's namespace and repository.
struct Setup {
    ns: TestNamespace,
    repo: Repo,
}

impl Setup {
    async fn new(prefix: &str) -> Setup {
        let ns = TestNamespace::create(prefix).await;
        Setup {
            ns,
            repo: Repo::new(),
        }
    }

    /// Starts the controller with a resync long enough never to fire.
    async fn start_controller(&self) {
        let config = tether_controller::Config {
            resync: Duration::from_secs(3600),
            ..config_for(&self.ns)
        };
        start_controller_with(&self.ns, config).await;
    }

    /// Starts the controller (see [`Self::start_controller`]) and creates
    /// Application `shop` for the repository.
    async fn start_app(&self) -> Api<Application> {
        self.start_controller().await;
        create_app(&self.ns, &self.repo).await
    }
}

/// A one-replica Deployment `name` at `path`, with `extra_spec` lines.
fn deployment(
    path: &'static str,
    name: &str,
    image: &str,
    extra_spec: &str,
) -> (&'static str, String) {
    (
        path,
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 1\n{extra_spec}  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n        - name: app\n          image: {image}\n"
        ),
    )
}

fn file(path: &'static str, text: &str) -> (&'static str, String) {
    (path, text.to_string())
}

/// The health of resource `kind/name` in `status`.
fn resource_health<'a>(
    status: &'a ApplicationStatus,
    kind: &str,
    name: &str,
) -> Option<&'a HealthInfo> {
    status
        .resources
        .iter()
        .find(|r| r.kind == kind && r.name == name)?
        .health
        .as_ref()
}

fn has_health(status: &ApplicationStatus, kind: &str, name: &str, health: &str) -> bool {
    resource_health(status, kind, name).is_some_and(|h| h.status == health)
}

/// The status once resource `kind/name` has `health`.
async fn health_where(
    apps: &Api<Application>,
    kind: &str,
    name: &str,
    health: &str,
) -> ApplicationStatus {
    let what = format!("{kind} {name} {health}");
    status_where(apps, &what, |s| has_health(s, kind, name, health)).await
}

/// Every status the Application `shop` is written with, in order, from a
/// watch started before it exists (and after its CRD is installed).
fn record_statuses(apps: &Api<Application>) -> Arc<Mutex<Vec<ApplicationStatus>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let stream = watcher(
        apps.clone(),
        watcher::Config::default().fields("metadata.name=shop"),
    )
    .retrying()
    .applied_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            if let Ok(Application {
                status: Some(status),
                ..
            }) = event
            {
                sink.lock().unwrap().push(status);
            }
        }
    });
    seen
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deployment_rolls_out_from_progressing_to_healthy_and_the_app_converges() {
    let setup = Setup::new("health-rollout").await;
    // minReadySeconds keeps the rollout visibly in progress for a while.
    setup.repo.commit(
        &[deployment(
            "app/web.yaml",
            "web",
            "nginx:1.27",
            "  minReadySeconds: 2\n",
        )],
        "web",
    );
    setup.start_controller().await;
    let apps: Api<Application> = Api::namespaced(setup.ns.client.clone(), &setup.ns.name);
    let seen = record_statuses(&apps);
    let apps = create_app(&setup.ns, &setup.repo).await;

    let status = status_where(&apps, "Synced + Healthy", |s| {
        s.sync.status == "Synced" && s.health.status == "Healthy"
    })
    .await;
    assert_eq!(status.state.map(|state| state.as_str()), Some("Converged"));
    let web = resource_health(&status, "Deployment", "web").unwrap();
    assert_eq!(web.message, "Deployment web: 1/1 replicas available");

    // The watch may deliver the Healthy status a moment after the read.
    let seen = eventually("the watch to see the Deployment Healthy", || {
        let seen = seen.lock().unwrap().clone();
        let healthy = seen.iter().any(|s| {
            resource_health(s, "Deployment", "web").is_some_and(|h| h.status == "Healthy")
        });
        async move { healthy.then_some(seen) }
    })
    .await;
    assert!(
        seen.iter()
            .all(|s| s.state.map(|state| state.as_str()) != Some("AppliedButFailing")),
        "a fresh sync is never reported as failing: {seen:#?}"
    );
    let healths: Vec<tether_core::HealthStatus> = seen
        .iter()
        .filter_map(|s| resource_health(s, "Deployment", "web").map(|h| h.status))
        .collect();
    let progressing = healths.iter().position(|h| h == "Progressing");
    let healthy = healths.iter().position(|h| h == "Healthy");
    assert!(
        progressing.is_some() && progressing < healthy,
        "expected Progressing before Healthy, saw {healths:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_image_that_cannot_be_pulled_is_applied_but_failing_until_git_fixes_it() {
    let setup = Setup::new("health-pull").await;
    let deadline = "  progressDeadlineSeconds: 5\n";
    setup.repo.commit(
        &[deployment(
            "app/web.yaml",
            "web",
            "tether.test/badimage:1",
            deadline,
        )],
        "a typo in the image",
    );
    // Git is polled on the resync (no webhook here), so this test keeps
    // the ordinary short one to notice the fixing commit.
    start_controller(&setup.ns).await;
    let apps = create_app(&setup.ns, &setup.repo).await;

    let status = status_where(&apps, "Synced + Degraded", |s| {
        s.sync.status == "Synced" && s.health.status == "Degraded"
    })
    .await;
    assert_eq!(
        status.state.map(|state| state.as_str()),
        Some("AppliedButFailing")
    );
    let web = resource_health(&status, "Deployment", "web").unwrap();
    assert_starts_with(
        &web.message,
        "Deployment web: rollout exceeded its progress deadline (1/1 replicas updated, 0 available)",
    );
    assert!(
        status
            .health
            .message
            .ends_with("has timed out progressing."),
        "{}",
        status.health.message
    );

    let fixed = setup.repo.commit(
        &[deployment("app/web.yaml", "web", "nginx:1.27", deadline)],
        "fix the image",
    );
    let status = status_where(&apps, "Healthy at the fixing commit", |s| {
        s.sync.revision.as_deref() == Some(fixed.as_str())
            && s.sync.status == "Synced"
            && s.health.status == "Healthy"
    })
    .await;
    assert_eq!(status.state.map(|state| state.as_str()), Some("Converged"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crashing_container_is_degraded_with_its_growing_restart_count() {
    let setup = Setup::new("health-crash").await;
    let pod = |name: &str, image: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n    - name: app\n      image: {image}\n"
        )
    };
    setup.repo.commit(
        &[
            file("app/crash.yaml", &pod("crash", "tether.test/crashloop:1")),
            file("app/pull.yaml", &pod("pull", "tether.test/badimage:1")),
            deployment(
                "app/crashing.yaml",
                "crashing",
                "tether.test/crashloop:1",
                "  progressDeadlineSeconds: 5\n",
            ),
        ],
        "pods that do not work",
    );
    let apps = setup.start_app().await;

    // The restart count grows (the fake kubelet restarts every 10 s) and
    // each new count reaches the status through the Pod's watch.
    let status = status_where(&apps, "the crashing pod Degraded after 2 restarts", |s| {
        resource_health(s, "Pod", "crash").is_some_and(|h| {
            h.status == "Degraded" && h.message.contains("CrashLoopBackOff (restarts 2)")
        })
    })
    .await;
    let crash = resource_health(&status, "Pod", "crash").unwrap();
    assert_starts_with(
        &crash.message,
        "Pod crash: container app in CrashLoopBackOff (restarts 2): back-off restarting failed container app",
    );
    let pull = resource_health(&status, "Pod", "pull").unwrap();
    assert_eq!(pull.status, "Degraded");
    assert_starts_with(
        &pull.message,
        "Pod pull: container app in ImagePullBackOff (restarts 0)",
    );
    let status = health_where(&apps, "Deployment", "crashing", "Degraded").await;
    let crashing = resource_health(&status, "Deployment", "crashing").unwrap();
    assert_starts_with(
        &crashing.message,
        "Deployment crashing: rollout exceeded its progress deadline (1/1 replicas updated, 0 available)",
    );
    assert_eq!(status.sync.status, "Synced");
    assert_eq!(status.health.status, "Degraded");
    assert_eq!(
        status.state.map(|state| state.as_str()),
        Some("AppliedButFailing")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_job_is_degraded_a_suspended_cronjob_suspended_and_an_unbound_claim_progressing() {
    let setup = Setup::new("health-batch").await;
    setup.repo.commit(
        &[
            file(
                "app/job.yaml",
                "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: migrate\n          image: tether.test/fail:1\n",
            ),
            file(
                "app/cronjob.yaml",
                "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: nightly\nspec:\n  schedule: \"0 3 * * *\"\n  suspend: true\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: OnFailure\n          containers:\n            - name: report\n              image: example.com/report:1\n",
            ),
            file(
                "app/claim.yaml",
                "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\nspec:\n  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n",
            ),
        ],
        "batch work and storage",
    );
    let apps = setup.start_app().await;

    let status = health_where(&apps, "Job", "migrate", "Degraded").await;
    let job = resource_health(&status, "Job", "migrate").unwrap();
    assert_starts_with(&job.message, "Job migrate: failed: ");
    let cronjob = resource_health(&status, "CronJob", "nightly").unwrap();
    assert_eq!(cronjob.status, "Suspended");
    assert_eq!(cronjob.message, "CronJob nightly: schedule suspended");
    let claim = resource_health(&status, "PersistentVolumeClaim", "data").unwrap();
    assert_eq!(claim.status, "Progressing");
    assert_eq!(
        claim.message,
        "PersistentVolumeClaim data: waiting to be bound"
    );
    assert_eq!(status.sync.status, "Synced");
    assert_eq!(status.health.status, "Degraded");
    assert_eq!(
        status.health.message,
        format!("1 of 3 resources Degraded; first: {}", job.message)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_rules_from_a_configmap_and_application_rules_judge_live_objects() {
    let setup = Setup::new("health-rules").await;
    setup.repo.commit(
        &[file(
            "app/settings.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: maintenance\n",
        )],
        "settings",
    );
    // A cluster-wide rule, in the controller's namespace.
    let rules = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": RULES_CONFIGMAP, "namespace": setup.ns.name},
        "data": {"configmaps.yaml": "rules:\n- group: ''\n  kinds: [ConfigMap]\n  suspended: \"get(self, 'data.mode', '') == 'maintenance'\"\n  healthy: 'true'\n  message: \"health == 'Suspended' ? 'in maintenance' : 'serving'\"\n"}});
    let configmaps: Api<ConfigMap> = Api::namespaced(setup.ns.client.clone(), &setup.ns.name);
    configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(rules).unwrap(),
        )
        .await
        .unwrap();
    let apps = setup.start_app().await;

    let status = health_where(&apps, "ConfigMap", "settings", "Suspended").await;
    let settings = resource_health(&status, "ConfigMap", "settings").unwrap();
    assert_eq!(settings.message, "ConfigMap settings: in maintenance");
    let condition = tether_testkit::condition(&status, "HealthRules").unwrap();
    assert_eq!(condition.status, "True");

    // The Application's own rule takes precedence.
    let own = |degraded: &str| {
        json!({"apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "shop"},
            "spec": {"health": {"rules": [{"group": "", "kinds": ["ConfigMap"],
                "degraded": degraded, "healthy": "true"}]}}})
    };
    let patch = |body: serde_json::Value| {
        let apps = apps.clone();
        async move {
            apps.patch(
                "shop",
                &PatchParams::apply("test-rules"),
                &Patch::Apply(&body),
            )
            .await
            .unwrap();
        }
    };
    patch(own("has(self.data) && self.data.mode == 'maintenance'")).await;
    health_where(&apps, "ConfigMap", "settings", "Degraded").await;

    // A rule that does not compile is left out and named in a condition;
    // the cluster's rule judges again.
    patch(own("self.data.(")).await;
    let status = status_where(&apps, "the HealthRules condition False", |s| {
        has_condition(s, "HealthRules", ConditionStatus::False)
    })
    .await;
    let condition = tether_testkit::condition(&status, "HealthRules").unwrap();
    assert_eq!(condition.reason, "RulesLeftOut");
    assert_starts_with(
        &condition.message,
        &format!(
            "Application {}/shop spec.health.rules: rule /ConfigMap: `degraded` does not compile",
            setup.ns.name
        ),
    );
    health_where(&apps, "ConfigMap", "settings", "Suspended").await;

    // Deleting the cluster's rules is noticed through the ConfigMap's
    // watch: a ConfigMap has no built-in check, so it has no health.
    configmaps
        .delete(RULES_CONFIGMAP, &DeleteParams::default())
        .await
        .unwrap();
    let status = status_where(&apps, "no health for the ConfigMap", |s| {
        s.resources
            .iter()
            .any(|r| r.name == "settings" && r.health.is_none())
    })
    .await;
    assert_eq!(status.health.status, "Healthy");
}
