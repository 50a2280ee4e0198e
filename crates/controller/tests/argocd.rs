//! Repositories written the Argo CD way, against the real local control
//! plane (the fake kubelet runs pods, and a pod that does not restart
//! completes, so Jobs complete): Jobs named by the API server
//! (`generateName`), `argocd.argoproj.io/sync-wave`, and hooks.

mod support;

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use support::waves::{synced_wave_by_wave, two_waves};
use support::{app_of, deployment, jobs, status_where};
use tether_testkit::{condition, eventually};

/// A Job the API server names (`migrate-…`), running `version`'s migration.
fn migration(version: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  generateName: migrate-\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: migrate\n          image: busybox:1.36\n          command: [migrate, \"{version}\"]\n"
    )
}

fn name_and_uid(job: &Job) -> (String, String) {
    (
        job.metadata.name.clone().unwrap(),
        job.metadata.uid.clone().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_named_by_the_server_is_created_once_and_replaced_when_it_changes() {
    let (ns, repo, apps) = app_of(
        "generated",
        &[
            ("app/web.yaml", deployment(1)),
            ("app/migrate.yaml", migration("v1")),
        ],
        json!({"prune": true}),
    )
    .await;
    let first = repo.head();

    // Synced and Healthy: the Job was created and completed.
    let synced_and_healthy = |revision: String| {
        move |s: &tether_controller::api::ApplicationStatus| {
            s.sync.revision.as_deref() == Some(revision.as_str())
                && s.sync.status == "Synced"
                && s.health.status == "Healthy"
        }
    };
    status_where(
        &apps,
        "Synced and Healthy",
        synced_and_healthy(first.clone()),
    )
    .await;
    let created = jobs(&ns).await;
    assert_eq!(created.len(), 1, "one Job");
    let (name, uid) = name_and_uid(&created[0]);
    assert!(
        name.starts_with("migrate-") && name.len() > "migrate-".len(),
        "{name}"
    );

    // Several reconciles later (the resync is 2 s) there is still one,
    // recorded by name and UID, in the inventory, in sync and not drifted.
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        jobs(&ns).await.iter().map(name_and_uid).collect::<Vec<_>>(),
        [(name.clone(), uid.clone())]
    );
    let status = status_where(&apps, "Synced and Healthy", synced_and_healthy(first)).await;
    let recorded: Vec<(&str, &str, &str)> = status
        .generated
        .iter()
        .map(|g| (g.generate_name.as_str(), g.name.as_str(), g.uid.as_str()))
        .collect();
    assert_eq!(recorded, [("migrate-", name.as_str(), uid.as_str())]);
    assert!(
        status
            .inventory
            .iter()
            .any(|e| e.kind == "Job" && e.name == name)
    );
    assert!(
        status.drift.is_empty() && status.last_drift.is_empty(),
        "{:?}",
        status.drift
    );
    let job = status.resources.iter().find(|r| r.kind == "Job").unwrap();
    assert_eq!(job.name, name);

    // A commit that changes the Job creates its replacement; the app
    // prunes, so the one before is deleted like any orphan.
    let second = repo.commit(
        &[("app/migrate.yaml", migration("v2"))],
        "the next migration",
    );
    let status = status_where(
        &apps,
        "the next migration Synced and Healthy",
        synced_and_healthy(second),
    )
    .await;
    let replacement = eventually("only the new Job left", || async {
        let now = jobs(&ns).await;
        (now.len() == 1 && now[0].metadata.uid.as_deref() != Some(uid.as_str()))
            .then(|| name_and_uid(&now[0]))
    })
    .await;
    assert_ne!(replacement.0, name);
    let command = jobs(&ns).await[0]
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .command
        .clone()
        .unwrap();
    assert_eq!(command, ["migrate", "v2"]);
    assert!(
        status
            .orphans
            .iter()
            .any(|o| o.object == format!("Job {}/{name}", ns.name) && o.prune.is_deleted()),
        "{:?}",
        status.orphans
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_argo_cd_sync_wave_orders_the_waves_as_tethers_own_does() {
    // Wave 1's ConfigMap, which kind order alone would apply first.
    let (ns, repo, apps) = app_of(
        "argo-waves",
        &two_waves("argocd.argoproj.io/sync-wave", "nginx:1.27"),
        json!({"waitForWaves": true}),
    )
    .await;

    let status = synced_wave_by_wave(&ns, &apps, &repo.head()).await;
    assert!(condition(&status, "Unsupported").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_argo_cd_presync_hook_runs_and_is_deleted_once_it_succeeded() {
    let hook = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n    argocd.argoproj.io/hook: PreSync\n    argocd.argoproj.io/hook-delete-policy: HookSucceeded\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: migrate\n          image: busybox:1.36\n";
    let settings = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations:\n    argocd.argoproj.io/sync-options: Prune=false\ndata:\n  greeting: hi\n";
    let (ns, repo, apps) = app_of(
        "argo-hook",
        &[("app/hook.yaml", hook), ("app/settings.yaml", settings)],
        json!({}),
    )
    .await;
    let commit = repo.head();

    let status = status_where(&apps, "Synced with a warning", |s| {
        s.sync.revision.as_deref() == Some(commit.as_str())
            && s.sync.status == "Synced"
            && condition(s, "Unsupported").is_some()
    })
    .await;
    let unsupported = condition(&status, "Unsupported").unwrap();
    assert_eq!(
        (unsupported.status.as_str(), unsupported.reason.as_str()),
        ("True", "ArgoCDAnnotation")
    );
    let message = &unsupported.message;
    assert!(!message.contains("argocd.argoproj.io/hook"), "{message}");
    assert!(
        message.contains(&format!(
            "ConfigMap {}/settings: argocd.argoproj.io/sync-options \"Prune=false\" is not supported; ignored",
            ns.name
        )),
        "{message}"
    );
    let hooks = &status.history[0].hooks;
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    assert_eq!(hooks[0].name, format!("Job {}/migrate", ns.name));
    assert_eq!(hooks[0].outcome, tether_core::hook::HookOutcome::Succeeded);
    eventually("the hook deleted once it succeeded", || async {
        jobs(&ns).await.is_empty().then_some(())
    })
    .await;
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    assert!(config_maps.get_opt("settings").await.unwrap().is_some());
}
