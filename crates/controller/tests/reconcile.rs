//! The loop end to end against the real local control plane: a real Git
//! repository (file://), the controller running in-process, kubectl making
//! drift.

mod support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use support::{
    Repo, app, app_of, create_app, create_app_with, start_controller, status_where, web, web_app,
};
use tether_controller::api::Application;
use tether_controller::install;
use tether_core::tracking::{APP_LABEL, TRACKING_ANNOTATION};
use tether_core::{Action, ConditionStatus};
use tether_testkit::{Requests, TestNamespace, eventually, has_condition};

#[tokio::test(flavor = "multi_thread")]
async fn a_new_application_reaches_synced_and_healthy_and_follows_new_commits() {
    let (ns, repo, apps) = web_app("loop", json!({})).await;
    let first = repo.head();

    let status = status_where(&apps, "Synced + Healthy at the first commit", |s| {
        s.sync.status == "Synced"
            && s.health.status == "Healthy"
            && s.sync.revision.as_deref() == Some(first.as_str())
    })
    .await;
    assert_eq!(status.state.map(|state| state.as_str()), Some("Converged"));
    assert_eq!(status.inventory.len(), 2);
    assert_eq!(status.history.len(), 1);

    // The objects carry Tether's marks and field manager.
    let config: ConfigMap = ns.get("settings").await;
    assert_eq!(config.labels()[APP_LABEL], format!("{}.shop", ns.name));
    assert!(config.annotations().contains_key(TRACKING_ANNOTATION));
    let managers: Vec<_> = config
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["tether"]);

    // A new commit: synced at the new revision, with history.
    let second = repo.commit(&web(2, "hello again"), "second");
    let status = status_where(&apps, "Synced at the second commit", |s| {
        s.sync.status == "Synced" && s.sync.revision.as_deref() == Some(second.as_str())
    })
    .await;
    assert_eq!(status.history.len(), 2);
    assert_eq!(status.history[0].revision, second);
    let config: ConfigMap = ns.get("settings").await;
    assert_eq!(config.data.unwrap()["greeting"], "hello again");
}

use kube::ResourceExt;

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_scale_is_reverted_and_a_foreign_label_is_not_drift() {
    let (ns, _repo, apps) = web_app("heal", json!({})).await;
    status_where(&apps, "Synced", |s| s.sync.status == "Synced").await;

    // Someone else's label is not drift: the app stays Synced, the label stays.
    let output = ns.kubectl(&["label", "configmap/settings", "team=payments"]);
    assert!(output.status.success());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let status = apps.get("shop").await.unwrap().status.unwrap();
    assert_eq!(status.sync.status, "Synced");
    let config: ConfigMap = ns.get("settings").await;
    assert_eq!(config.labels()["team"], "payments");

    // kubectl scale is reverted.
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=5"]);
    let deployments = ns.api::<Deployment>();
    eventually("spec.replicas reverted to 2", || async {
        let replicas = deployments.get("web").await.ok()?.spec?.replicas?;
        (replicas == 2).then_some(())
    })
    .await;
    let status = status_where(&apps, "Synced after self-heal", |s| {
        s.sync.status == "Synced" && s.history.len() >= 2
    })
    .await;
    assert_eq!(status.history[0].initiator, "self-heal");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_with_one_invalid_object_applies_nothing_and_the_next_good_commit_recovers() {
    let (ns, repo, apps) = web_app("bad-commit", json!({})).await;
    status_where(&apps, "Synced", |s| s.sync.status == "Synced").await;

    // One good change and one invalid object in the same commit.
    let mut files = web(2, "changed");
    files.push((
        "app/bad.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: bad\nspec:\n  ports:\n    - port: not-a-number\n".to_string(),
    ));
    repo.commit(&files, "bad");
    let status = status_where(&apps, "the failure to be reported", |s| {
        has_condition(s, "Reconciled", ConditionStatus::False)
    })
    .await;
    assert_eq!(status.sync.status, "OutOfSync");
    let condition = tether_testkit::condition(&status, "Reconciled").unwrap();
    assert_eq!(condition.reason, "ValidationFailed");
    assert!(
        condition
            .message
            .contains(&format!("Service {}/bad", ns.name)),
        "{}",
        condition.message
    );
    let config: ConfigMap = ns.get("settings").await;
    assert_eq!(
        config.data.unwrap()["greeting"],
        "hello",
        "nothing of the bad commit was applied"
    );

    // The next good commit recovers.
    std::fs::remove_file(repo.dir.join("app/bad.yaml")).unwrap();
    let good = repo.commit(&web(2, "changed"), "fix");
    status_where(&apps, "Synced at the fixed commit", |s| {
        s.sync.status == "Synced"
            && s.sync.revision.as_deref() == Some(good.as_str())
            && has_condition(s, "Reconciled", ConditionStatus::True)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn server_defaulted_fields_never_show_as_drift() {
    // No strategy on the Deployment, no sessionAffinity/type on the Service:
    // the API server fills them in.
    let mut files = web(1, "hello");
    files.push((
        "app/service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports:\n    - port: 80\n".to_string(),
    ));
    let (_ns, _repo, apps) = app_of("defaults", &files, json!({})).await;
    let status = status_where(&apps, "Synced", |s| s.sync.status == "Synced").await;
    assert!(
        status
            .resources
            .iter()
            .all(|r| r.sync == "Synced" && r.drift.is_none()),
        "{:?}",
        status.resources
    );
    // Several resyncs later it is still Synced and was synced exactly once.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let status = apps.get("shop").await.unwrap().status.unwrap();
    assert_eq!(status.sync.status, "Synced");
    assert_eq!(
        status.history.len(),
        1,
        "no sync after the first: {:?}",
        status.history
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn applications_created_at_once_all_reach_synced() {
    // Several reconciles then wait together for the first list of a newly
    // watched kind; every one of them must be woken.
    let ns = TestNamespace::create("burst").await;
    let repo = Repo::new();
    let mut files = Vec::new();
    for i in 0..8 {
        for (path, text) in web(1, "hi") {
            let text = text.replace("name: settings", &format!("name: settings-{i}"));
            let text = text.replace("name: web\n", &format!("name: web-{i}\n"));
            files.push((path.replace("app/", &format!("app-{i}/")), text));
        }
    }
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    repo.commit(&files, "eight apps");
    start_controller(&ns).await;
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &ns.name);
    for i in 0..8 {
        let name = format!("app-{i}");
        app(&ns, &name, &repo, &name).apply(&ns.client).await;
    }
    let last = std::sync::Mutex::new(String::new());
    let waited = tokio::time::timeout(tether_testkit::PATIENCE, eventually(
        "all eight Applications Synced, with revision and history",
        || async {
            let list = apps.list(&Default::default()).await.ok()?;
            *last.lock().unwrap() = list
                .items
                .iter()
                .map(|a| {
                    let status = a.status.as_ref();
                    format!(
                        "{}: sync={:?} revision={:?} history={} conditions={:?} operation={:?}\n",
                        a.metadata.name.as_deref().unwrap_or_default(),
                        status.map(|s| s.sync.status),
                        status.and_then(|s| s.sync.revision.clone()),
                        status.map(|s| s.history.len()).unwrap_or(0),
                        status.map(|s| s.conditions.iter().map(|c| format!("{}={} {} {}", c.type_, c.status, c.reason, c.message)).collect::<Vec<_>>()),
                        status.and_then(|s| s.operation_state.as_ref().map(|o| format!("{} {}", o.phase, o.message))),
                    )
                })
                .collect();
            let synced = list
                .items
                .iter()
                .filter(|a| {
                    a.status.as_ref().is_some_and(|s| {
                        s.sync.status == "Synced"
                            && s.sync.revision.is_some()
                            && s.history.len() == 1
                    })
                })
                .count();
            (synced == 8).then_some(())
        },
    ))
    .await;
    assert!(
        waited.is_ok(),
        "not all Synced; last:\n{}",
        last.lock().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_application_deleted_and_created_again_gets_a_status_of_its_own() {
    let (ns, repo, apps) = web_app("recreate", json!({})).await;
    let first = status_where(&apps, "Synced", |s| s.sync.status == "Synced").await;
    let first_uid = apps.get("shop").await.unwrap().uid();

    apps.delete("shop", &Default::default()).await.unwrap();
    eventually("the Application gone", || async {
        apps.get_opt("shop").await.unwrap().is_none().then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    create_app(&ns, &repo).await;
    assert_ne!(apps.get("shop").await.unwrap().uid(), first_uid);
    // A fresh status, written for the new Application: not the old one's
    // remembered (which would also have meant writing nothing at all).
    status_where(&apps, "Synced, with a sync of its own", |s| {
        s.sync.status == "Synced"
            && s.history.len() == 1
            && s.history[0].time != first.history[0].time
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_commit_elsewhere_in_a_monorepo_is_recorded_without_a_sync() {
    let other = |value: &str| {
        (
            "other/cm.yaml",
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  v: \"{value}\"\n"
            ),
        )
    };
    let mut files = web(1, "hello");
    files.push(other("1"));
    let (_ns, repo, apps) = app_of("mono", &files, json!({})).await;
    let first = repo.head();
    let synced = status_where(&apps, "Synced at the first commit", |s| {
        s.sync.status == "Synced" && s.sync.revision.as_deref() == Some(first.as_str())
    })
    .await;
    let operation = synced.operation_state.clone().unwrap();

    // A commit that touches only another app's directory: the new commit
    // is recorded, but no sync runs (no operation, no history entry).
    let second = repo.commit(&[other("2")], "another app");
    let status = status_where(&apps, "the second commit recorded", |s| {
        s.sync.revision.as_deref() == Some(second.as_str())
    })
    .await;
    assert_eq!(status.sync.status, "Synced");
    assert_eq!(status.history.len(), 1, "{:?}", status.history);
    assert_eq!(status.operation_state.as_ref(), Some(&operation));
    assert_eq!(status.sync.objects_digest, synced.sync.objects_digest);

    // A commit that changes the app's objects is synced as before.
    let third = repo.commit(&web(1, "hello again"), "this app");
    let status = status_where(&apps, "Synced at the third commit", |s| {
        s.sync.status == "Synced" && s.sync.revision.as_deref() == Some(third.as_str())
    })
    .await;
    assert_eq!(status.history.len(), 2);
    assert_eq!(status.operation_state.unwrap().revision, third);
    assert_ne!(status.sync.objects_digest, synced.sync.objects_digest);
}

/// What a sync costs in API requests: the comparison's dry-run validates a
/// changed object, objects in sync are not sent again, and the changed one
/// is applied over the resourceVersion the watch cache had.
#[tokio::test(flavor = "multi_thread")]
async fn a_commit_changing_one_object_of_twenty_costs_one_dry_run_and_one_apply() {
    let ns = TestNamespace::create("cost").await;
    let repo = Repo::new();
    let files = |changed: &str| -> Vec<(String, String)> {
        (0..20)
            .map(|i| {
                let value = if i == 7 { changed } else { "same" };
                (
                    format!("app/cm-{i:02}.yaml"),
                    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i:02}\ndata:\n  v: \"{value}\"\n"),
                )
            })
            .collect()
    };
    let first = repo.commit(&as_refs(&files("one")), "first");
    install::install(ns.client.clone(), &ns.name).await.unwrap();
    let (client, requests) = tether_testkit::recording_client(&ns.kubeconfig).await;
    let config = support::config_for(&ns);
    tokio::spawn(async move { tether_controller::run(client, config).await });
    let apps = create_app(&ns, &repo).await;
    status_where(&apps, "Synced at the first commit", |s| {
        s.sync.status == "Synced" && s.sync.revision.as_deref() == Some(first.as_str())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    requests.take();

    let second = repo.commit(&as_refs(&files("two")), "change cm-07");
    let status = status_where(&apps, "Synced at the second commit", |s| {
        s.sync.status == "Synced" && s.sync.revision.as_deref() == Some(second.as_str())
    })
    .await;
    let sent = requests.take();
    let config_maps: Vec<&String> = Requests::beyond_watches(&sent)
        .into_iter()
        .filter(|r| r.contains("/configmaps"))
        .collect();
    assert_eq!(config_maps.len(), 2, "{config_maps:#?}");
    assert!(
        config_maps
            .iter()
            .all(|r| r.starts_with("PATCH ") && r.contains("/configmaps/cm-07?"))
    );
    assert!(config_maps[0].contains("dryRun=All"), "{config_maps:#?}");
    let changes = &status.operation_state.unwrap().changes;
    assert_eq!(changes.len(), 20);
    assert_eq!(
        changes
            .iter()
            .filter(|c| c.action != Action::Unchanged)
            .count(),
        1,
        "{changes:?}"
    );
    let live: ConfigMap = ns.get("cm-07").await;
    assert_eq!(live.data.unwrap()["v"], "two");
}

fn as_refs(files: &[(String, String)]) -> Vec<(&str, String)> {
    files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sync_request_made_while_another_is_handled_is_never_dropped() {
    use tether_controller::request::{self, SyncRequest};
    let ns = TestNamespace::create("requests").await;
    let repo = Repo::new();
    let one = repo.commit(&web(1, "one"), "one");
    let two = repo.commit(&web(1, "two"), "two");
    start_controller(&ns).await;
    let apps = create_app_with(&ns, &repo, json!({"automated": false})).await;
    let ask = |revision: &str| {
        let client = ns.client.clone();
        let (namespace, revision) = (ns.name.clone(), revision.to_string());
        async move {
            let asked = SyncRequest {
                revision: Some(revision),
                ..SyncRequest::default()
            };
            request::request_sync_with(client, &namespace, "shop", &asked)
                .await
                .unwrap()
        }
    };
    // Two requests in a row, the second while the controller handles the
    // first: the second is the one that stands, whatever the timing.
    for (round, pause) in [0, 15, 30, 50, 80, 120, 170, 250].into_iter().enumerate() {
        let (first, last) = if round % 2 == 0 {
            (&one, &two)
        } else {
            (&two, &one)
        };
        ask(first).await;
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let stamp = ask(last).await;
        let greeting = if last == &two { "two" } else { "one" };
        eventually("the last request handled", || async {
            let app = apps.get("shop").await.ok()?;
            let synced = app.status.as_ref()?.sync.revision.as_deref() == Some(last.as_str());
            (synced && !request::pending(&app, &stamp)).then_some(())
        })
        .await;
        let config: ConfigMap = ns.get("settings").await;
        assert_eq!(
            config.data.unwrap()["greeting"],
            greeting,
            "round {round}: the sync to {last} did not stand"
        );
    }
}
