//! Sync hooks against the real local control plane. Its
//! kube-controller-manager runs the Job controller and its fake kubelet
//! finishes every pod that does not restart: exit 0, or exit 1 for the
//! image `tether.test/fail` — so the Jobs here complete or fail as on a
//! real cluster, and nothing in the test writes a Job's status.

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use support::{
    Repo, app_of, config_for, create_app_with, deployment, jobs, status_where, sync_failed,
};
use tether_controller::api::application::HookRun;
use tether_controller::install;
use tether_core::hook::{HookOutcome, HookPhase};
use tether_testkit::{Requests, TestNamespace, assert_starts_with, condition, eventually};

/// A Job hook annotated with `annotations` (YAML lines under
/// `annotations:`), running `image` once.
fn job(name_line: &str, annotations: &str, image: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  {name_line}\n  annotations:\n{annotations}spec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: run\n          image: {image}\n"
    )
}

const SETTINGS: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  greeting: hi\n";

fn run_of<'a>(runs: &'a [HookRun], name_part: &str) -> &'a HookRun {
    runs.iter()
        .find(|run| run.name.contains(name_part))
        .unwrap_or_else(|| panic!("no hook run named like {name_part}: {runs:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_presync_hook_applies_nothing_else_and_runs_the_syncfail_hook() {
    let migrate = job(
        "name: migrate",
        "    tether.dev/hook: PreSync\n",
        "tether.test/fail:1",
    );
    let on_failure = job(
        "name: on-failure",
        "    argocd.argoproj.io/hook: SyncFail\n",
        "busybox:1.36",
    );
    let (ns, _repo, apps) = app_of(
        "hook-fails",
        &[
            ("app/migrate.yaml", migrate.as_str()),
            ("app/on-failure.yaml", on_failure.as_str()),
            ("app/settings.yaml", SETTINGS),
            ("app/web.yaml", deployment(1).as_str()),
        ],
        json!({}),
    )
    .await;

    let status = sync_failed(&apps, "the sync failed on its PreSync hook", "PreSync hook").await;
    let operation = status.operation_state.as_ref().unwrap();
    assert_starts_with(
        &operation.message,
        &format!(
            "PreSync hook Job {}/migrate failed, nothing else applied: ",
            ns.name
        ),
    );
    assert!(
        operation.message.contains("BackoffLimitExceeded"),
        "{}",
        operation.message
    );
    assert_eq!(
        condition(&status, "Reconciled").unwrap().reason,
        "HookFailed"
    );
    assert!(operation.changes.is_empty(), "{:?}", operation.changes);

    // Nothing of the commit was applied.
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    assert!(config_maps.get_opt("settings").await.unwrap().is_none());
    let deployments: Api<Deployment> = Api::namespaced(ns.client.clone(), &ns.name);
    assert!(deployments.get_opt("web").await.unwrap().is_none());

    // The hook is named with its outcome; the SyncFail hook ran.
    let migrate = run_of(&operation.hooks, "/migrate");
    assert_eq!(
        (migrate.phase, migrate.outcome),
        (HookPhase::PreSync, HookOutcome::Failed)
    );
    assert!(migrate.finished_at.is_some());
    let on_failure = run_of(&operation.hooks, "/on-failure");
    assert_eq!(on_failure.phase, HookPhase::SyncFail);
    let names: Vec<String> = jobs(&ns)
        .await
        .into_iter()
        .filter_map(|j| j.metadata.name)
        .collect();
    assert!(names.contains(&"on-failure".to_string()), "{names:?}");
    // Hooks are not the app's resources.
    assert!(
        status.resources.iter().all(|r| r.kind != "Job"),
        "{:?}",
        status.resources
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_presync_hook_runs_before_the_deployment_and_postsync_once_it_is_healthy() {
    let ns = TestNamespace::create("hook-order").await;
    let repo = Repo::new();
    let migrate = job(
        "name: migrate",
        "    helm.sh/hook: pre-install,pre-upgrade\n    helm.sh/hook-delete-policy: hook-succeeded\n",
        "busybox:1.36",
    );
    let smoke = job(
        "generateName: smoke-",
        "    tether.dev/hook: PostSync\n",
        "busybox:1.36",
    );
    let commit = repo.commit(
        &[
            ("app/migrate.yaml", migrate.as_str()),
            ("app/smoke.yaml", smoke.as_str()),
            ("app/settings.yaml", SETTINGS),
            ("app/web.yaml", deployment(1).as_str()),
        ],
        "a migration, the app, a smoke test",
    );
    // The controller's own requests, in the order it sent them.
    tether_testkit::log_file();
    install::install(ns.client.clone(), &ns.name).await.unwrap();
    let (client, requests) = tether_testkit::recording_client(&ns.kubeconfig).await;
    let config = config_for(&ns);
    tokio::spawn(async move { tether_controller::run(client, config).await });
    let apps = create_app_with(&ns, &repo, json!({"prune": true})).await;

    let status = status_where(&apps, "synced with its hooks", |s| {
        s.sync.revision.as_deref() == Some(commit.as_str()) && s.sync.status == "Synced"
    })
    .await;
    let sent = requests.take();
    let writes: Vec<&String> = Requests::beyond_watches(&sent)
        .into_iter()
        .filter(|r| !r.starts_with("GET ") && !r.contains("dryRun"))
        .collect();
    let at = |what: &dyn Fn(&str) -> bool, name: &str| {
        writes
            .iter()
            .position(|r| what(r))
            .unwrap_or_else(|| panic!("no request {name} in {writes:#?}"))
    };
    let migrate_created = at(
        &|r| r.starts_with("POST ") && r.contains("/jobs"),
        "POST job",
    );
    let web_applied = at(
        &|r| r.starts_with("PATCH ") && r.contains("/deployments/web"),
        "PATCH deployment",
    );
    let smoke_created = writes
        .iter()
        .rposition(|r| r.starts_with("POST ") && r.contains("/jobs"))
        .unwrap();
    assert!(
        migrate_created < web_applied && web_applied < smoke_created,
        "order: migrate {migrate_created}, web {web_applied}, smoke {smoke_created}: {writes:#?}"
    );

    // PostSync ran only once the Deployment was Available.
    let deployments: Api<Deployment> = Api::namespaced(ns.client.clone(), &ns.name);
    let web = deployments.get("web").await.unwrap();
    let available = web
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Available" && c.status == "True")
        .and_then(|c| c.last_transition_time)
        .expect("web Available");
    let listed = jobs(&ns).await;
    let smoke = listed
        .iter()
        .find(|j| j.metadata.generate_name.as_deref() == Some("smoke-"))
        .expect("the PostSync hook kept (BeforeHookCreation only)");
    let smoke_at = smoke.metadata.creation_timestamp.clone().unwrap();
    assert!(
        smoke_at.0 >= available.0,
        "smoke {smoke_at:?} before Available {available:?}"
    );

    // HookSucceeded deleted the migration; both are in the operation and history.
    eventually("the migration deleted after it succeeded", || async {
        let jobs = jobs(&ns).await;
        jobs.iter()
            .all(|j| j.metadata.name.as_deref() != Some("migrate"))
            .then_some(())
    })
    .await;
    let operation = status.operation_state.as_ref().unwrap();
    let migrate = run_of(&operation.hooks, "/migrate");
    assert_eq!(
        (migrate.phase, migrate.outcome),
        (HookPhase::PreSync, HookOutcome::Succeeded)
    );
    let smoke_run = run_of(&operation.hooks, "/smoke-");
    assert_eq!(
        (
            smoke_run.phase,
            smoke_run.outcome,
            smoke_run.generate_name.as_deref()
        ),
        (HookPhase::PostSync, HookOutcome::Succeeded, Some("smoke-"))
    );
    assert_eq!(status.history[0].hooks, operation.hooks);

    // Hooks are neither drift nor orphans, and prune (on) left the smoke test.
    assert!(status.resources.iter().all(|r| r.kind != "Job"));
    assert!(status.drift.is_empty(), "{:?}", status.drift);
    assert!(status.orphans.is_empty(), "{:?}", status.orphans);

    // The next commit replaces the smoke test (BeforeHookCreation), and
    // prune never touched the first one before.
    let first_smoke = smoke.metadata.name.clone().unwrap();
    let second = repo.commit(&[("app/web.yaml", deployment(2).as_str())], "two replicas");
    let status = status_where(&apps, "synced again", |s| {
        s.sync.revision.as_deref() == Some(second.as_str()) && s.sync.status == "Synced"
    })
    .await;
    let smokes: Vec<String> = jobs(&ns)
        .await
        .into_iter()
        .filter(|j| j.metadata.generate_name.as_deref() == Some("smoke-"))
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .filter_map(|j| j.metadata.name)
        .collect();
    assert_eq!(smokes.len(), 1, "{smokes:?}");
    assert_ne!(smokes[0], first_smoke);
    assert!(status.orphans.is_empty(), "{:?}", status.orphans);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_presync_hook_that_runs_too_long_waits_without_a_worker_then_fails_the_sync() {
    // Restarted on failure and crash-looping: the Job never completes.
    let stuck = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: stuck\n  annotations:\n    tether.dev/hook: PreSync\n    tether.dev/hook-timeout: 8s\n    tether.dev/hook-delete-policy: HookFailed\nspec:\n  template:\n    spec:\n      restartPolicy: OnFailure\n      containers:\n        - name: run\n          image: tether.test/crashloop:1\n";
    let (ns, _repo, apps) = app_of(
        "hook-timeout",
        &[("app/stuck.yaml", stuck), ("app/settings.yaml", SETTINGS)],
        json!({}),
    )
    .await;

    // While it runs, the sync waits for it in status, applying nothing.
    let waiting = status_where(&apps, "the sync waiting for its PreSync hook", |s| {
        s.operation_state.as_ref().is_some_and(|o| {
            o.phase == "Running"
                && o.waiting
                    .as_ref()
                    .is_some_and(|w| w.hook == Some(HookPhase::PreSync))
        })
    })
    .await;
    let wait = waiting.operation_state.unwrap().waiting.unwrap();
    assert_starts_with(&wait.object, &format!("Job {}/stuck: ", ns.name));
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    assert!(config_maps.get_opt("settings").await.unwrap().is_none());
    let first = Api::<Job>::namespaced(ns.client.clone(), &ns.name)
        .get("stuck")
        .await
        .unwrap()
        .metadata
        .uid;

    // After its timeout the sync fails, naming it; HookFailed deletes it.
    let status = sync_failed(&apps, "the sync failed on the timeout", "did not finish").await;
    assert_starts_with(
        &status.operation_state.as_ref().unwrap().message,
        &format!(
            "PreSync hook Job {}/stuck failed, nothing else applied: did not finish within 8s",
            ns.name
        ),
    );
    assert!(config_maps.get_opt("settings").await.unwrap().is_none());
    eventually("the stuck hook deleted (HookFailed)", || async {
        // A retry of the sync may have created it again: a new one.
        let jobs = jobs(&ns).await;
        jobs.iter()
            .all(|j| j.metadata.uid != first || j.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_postsync_hook_does_not_run_while_an_object_is_unhealthy() {
    let smoke = job(
        "name: smoke",
        "    tether.dev/hook: PostSync\n",
        "busybox:1.36",
    );
    let crashing = deployment(1).replace("nginx:1.27", "tether.test/crashloop:1");
    let (ns, _repo, apps) = app_of(
        "hook-unhealthy",
        &[
            ("app/smoke.yaml", smoke.as_str()),
            ("app/web.yaml", crashing.as_str()),
        ],
        json!({"waveTimeoutSeconds": 6}),
    )
    .await;

    let status = sync_failed(&apps, "the sync failed before PostSync", "PostSync").await;
    assert_starts_with(
        &status.operation_state.as_ref().unwrap().message,
        &format!(
            "Deployment {}/web: not healthy after 6s, so the PostSync hooks did not run: ",
            ns.name
        ),
    );
    assert!(jobs(&ns).await.is_empty(), "the PostSync hook ran");
    assert!(status.operation_state.unwrap().hooks.is_empty());
}
