//! Drift and prune end to end: the real local control plane, the real
//! `kubectl` making the changes, a real Git repository, the controller
//! running in-process.

mod support;

use std::fmt::Debug;
use std::time::Duration;
use tether_core::{ConditionStatus, OperationPhase};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Service};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;
use serde_json::json;
use support::{
    HIJACK_GREETING, Repo, create_app_with, replicas, start_controller, status_where, web,
};
use tether_controller::api::application::DriftEntry;
use tether_controller::api::{Application, ApplicationStatus};
use tether_core::drift::DriftedField;
use tether_testkit::{TestNamespace, eventually, has_condition, run_ok};

fn service() -> (&'static str, String) {
    (
        "app/service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports:\n    - port: 80\n".into(),
    )
}

/// A namespace, a repository with the web app (Deployment with 2 replicas,
/// ConfigMap, Service) and a running controller with `policy`; waits until
/// the app is Synced.
async fn synced_app(
    prefix: &str,
    policy: serde_json::Value,
) -> (TestNamespace, Repo, Api<Application>) {
    let ns = TestNamespace::create(prefix).await;
    let repo = Repo::new();
    let mut files = web(2, "hello");
    files.push(service());
    repo.commit(&files, "first");
    start_controller(&ns).await;
    let apps = create_app_with(&ns, &repo, policy).await;
    status_where(&apps, "Synced with 3 objects in the inventory", |s| {
        s.sync.status == "Synced" && s.inventory.len() == 3
    })
    .await;
    (ns, repo, apps)
}

fn record<'a>(entries: &'a [DriftEntry], kind: &str, name: &str) -> Option<&'a DriftEntry> {
    entries
        .iter()
        .find(|e| e.record.object.kind == kind && e.record.object.name == name)
}

/// The notes of Events on the Application with `reason`.
async fn events(ns: &TestNamespace, reason: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(ns.client.clone(), &ns.name);
    let list = events
        .list(&ListParams::default().fields(&format!("reason={reason}")))
        .await
        .unwrap();
    list.items
        .into_iter()
        .filter(|e| e.involved_object.kind.as_deref() == Some("Application"))
        .filter_map(|e| e.message)
        .collect()
}

/// The first field of ConfigMap `settings`' last recorded drift.
fn settings_field(status: &ApplicationStatus) -> &DriftedField {
    &record(&status.last_drift, "ConfigMap", "settings")
        .unwrap()
        .record
        .fields[0]
}

/// Waits until ConfigMap `settings` has Git's greeting again.
async fn greeting_reverted(ns: &TestNamespace) {
    eventually("greeting reverted", || async {
        (greeting(ns).await == "hello").then_some(())
    })
    .await;
}

/// Waits until object `name` is gone from `api`.
async fn deleted<K>(api: &Api<K>, name: &str)
where
    K: Clone + DeserializeOwned + Debug,
{
    eventually(&format!("{name} deleted"), || async {
        api.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}

async fn greeting(ns: &TestNamespace) -> String {
    Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .get("settings")
        .await
        .unwrap()
        .data
        .unwrap()["greeting"]
        .clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_scale_is_reverted_and_recorded_as_manual_with_its_writer() {
    let (ns, _repo, apps) = synced_app("scale", json!({})).await;

    // A label Git does not set is not drift: no record, no revert.
    ns.kubectl_ok(&["label", "configmap/settings", "team=payments"]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let status = apps.get("shop").await.unwrap().status.unwrap();
    assert_eq!(status.sync.status, "Synced");
    assert!(
        status.drift.is_empty() && status.last_drift.is_empty(),
        "{:?}",
        status.drift
    );

    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=5"]);
    let status = status_where(&apps, "the scale recorded as healed drift", |s| {
        record(&s.last_drift, "Deployment", "web").is_some()
    })
    .await;
    let entry = record(&status.last_drift, "Deployment", "web").unwrap();
    assert_eq!(entry.record.kind.as_str(), "Manual");
    assert_ne!(entry.response, "BackedOff");
    assert!(entry.resolved_at.is_some());
    let field = &entry.record.fields[0];
    assert_eq!(field.path, "spec.replicas");
    assert_eq!(field.desired, Some(json!(2)));
    assert_eq!(field.live, Some(json!(5)));
    let writer = field.writer.as_ref().expect("a writer");
    println!(
        "kubectl scale writes as manager {:?} via {:?}",
        writer.manager, writer.subresource
    );
    assert!(writer.manager.starts_with("kubectl"), "{writer:?}");
    assert_eq!(writer.subresource.as_deref(), Some("scale"));
    assert_eq!(replicas(&ns).await, 2);

    // An Event names object, field and writer.
    let notes = eventually("a DriftReverted event", || async {
        let notes = events(&ns, "DriftReverted").await;
        (!notes.is_empty()).then_some(notes)
    })
    .await;
    assert!(
        notes[0].contains("spec.replicas") && notes[0].contains(&writer.manager),
        "{notes:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_patch_and_edit_of_a_config_value_are_reverted_and_attributed() {
    let (ns, _repo, apps) = synced_app("patch", json!({})).await;
    ns.kubectl_ok(&HIJACK_GREETING);
    let status = status_where(&apps, "the patch recorded", |s| {
        record(&s.last_drift, "ConfigMap", "settings").is_some()
    })
    .await;
    let field = settings_field(&status);
    assert_eq!(field.path, "data.greeting");
    assert_eq!(field.live, Some(json!("hijacked")));
    let manager = &field.writer.as_ref().unwrap().manager;
    println!("kubectl patch writes as manager {manager:?}");
    assert_eq!(manager, "kubectl-patch");
    greeting_reverted(&ns).await;

    // kubectl edit, driven by an editor that rewrites the value.
    run_ok(
        ns.kubectl_command(&["edit", "configmap/settings"])
            .env("KUBE_EDITOR", "sed -i s/hello/edited/"),
    );
    let status = status_where(&apps, "the edit recorded", |s| {
        record(&s.last_drift, "ConfigMap", "settings")
            .is_some_and(|e| e.record.fields[0].live == Some(json!("edited")))
    })
    .await;
    let field = settings_field(&status);
    let manager = &field.writer.as_ref().unwrap().manager;
    println!("kubectl edit writes as manager {manager:?}");
    assert_eq!(manager, "kubectl-edit");
    greeting_reverted(&ns).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_service_is_recreated_and_recorded_as_accidental() {
    let (ns, _repo, apps) = synced_app("delete", json!({})).await;
    ns.kubectl_ok(&["delete", "service/web"]);
    let status = status_where(&apps, "the deletion recorded", |s| {
        record(&s.last_drift, "Service", "web").is_some()
    })
    .await;
    let entry = record(&status.last_drift, "Service", "web").unwrap();
    assert_eq!(entry.record.kind.as_str(), "Accidental");
    assert!(entry.record.fields.is_empty());
    eventually("the Service recreated", || async {
        Api::<Service>::namespaced(ns.client.clone(), &ns.name)
            .get_opt("web")
            .await
            .ok()?
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_self_heal_off_the_change_persists_and_is_reported() {
    let (ns, _repo, apps) = synced_app("noheal", json!({"selfHeal": false})).await;
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=5"]);
    let status = status_where(&apps, "OutOfSync with a drift record", |s| {
        s.sync.status == "OutOfSync" && record(&s.drift, "Deployment", "web").is_some()
    })
    .await;
    let entry = record(&status.drift, "Deployment", "web").unwrap();
    assert_eq!(entry.response, "Reported");
    assert_eq!(entry.record.fields[0].live, Some(json!(5)));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(replicas(&ns).await, 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn warn_mode_reports_drift_with_a_warning_and_never_reverts() {
    let (ns, _repo, apps) = synced_app("warn", json!({"driftResponse": "warn"})).await;
    ns.kubectl_ok(&[
        "patch",
        "configmap/settings",
        "-p",
        r#"{"data":{"greeting":"hotfix"}}"#,
    ]);
    status_where(&apps, "a Reported drift record", |s| {
        record(&s.drift, "ConfigMap", "settings").is_some_and(|e| e.response == "Reported")
    })
    .await;
    let notes = eventually("a DriftDetected event", || async {
        let notes = events(&ns, "DriftDetected").await;
        (!notes.is_empty()).then_some(notes)
    })
    .await;
    assert!(
        notes[0].contains("data.greeting") && notes[0].contains("kubectl-patch"),
        "{notes:?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(greeting(&ns).await, "hotfix");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_writer_that_keeps_fighting_meets_back_off_and_a_condition_naming_it() {
    let (ns, _repo, apps) = synced_app("fight", json!({})).await;
    // Another writer re-patches the field after every revert, a bounded
    // number of times.
    let mut patches = 0;
    for _ in 0..8 {
        eventually("reverted to 2 (or backed off)", || async {
            let status = apps.get("shop").await.ok()?.status?;
            (replicas(&ns).await == 2 || backed_off(&status)).then_some(())
        })
        .await;
        if backed_off(&apps.get("shop").await.unwrap().status.unwrap()) {
            break;
        }
        ns.kubectl_ok(&[
            "patch",
            "deployment/web",
            "-p",
            r#"{"spec":{"replicas":5}}"#,
        ]);
        patches += 1;
    }
    let status = status_where(&apps, "the back-off condition", backed_off).await;
    let condition = tether_testkit::condition(&status, "SelfHealBackOff").unwrap();
    println!("after {patches} patches: {}", condition.message);
    assert!(
        condition
            .message
            .contains("fighting with `kubectl-patch` over spec.replicas")
    );
    assert!(patches <= 5, "backed off only after {patches} patches");
    let entry = record(&status.drift, "Deployment", "web").unwrap();
    assert_eq!(entry.response, "BackedOff");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(replicas(&ns).await, 5, "no revert during the back-off");
}

fn backed_off(status: &ApplicationStatus) -> bool {
    has_condition(status, "SelfHealBackOff", ConditionStatus::True)
}

#[tokio::test(flavor = "multi_thread")]
async fn with_prune_off_an_object_removed_from_git_is_kept_and_reported() {
    let (ns, repo, apps) = synced_app("orphan", json!({})).await;
    repo.git(&["rm", "-q", "app/config.yaml"]);
    repo.git(&["commit", "-q", "-m", "drop the config"]);
    let status = status_where(&apps, "the orphan reported", |s| !s.orphans.is_empty()).await;
    assert_eq!(
        status.orphans[0].object,
        format!("ConfigMap {}/settings", ns.name)
    );
    assert_eq!(status.orphans[0].prune, "kept: prune is off for this app");
    assert!(
        status.inventory.iter().any(|e| e.name == "settings"),
        "inventory keeps it"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(greeting(&ns).await, "hello");
}

#[tokio::test(flavor = "multi_thread")]
async fn with_prune_on_an_orphan_is_deleted_but_a_lookalike_never() {
    let (ns, repo, apps) = synced_app("prune", json!({"prune": true})).await;
    // Same label and even the tracking annotation, but Tether never applied it.
    let label = format!("{}.shop", ns.name);
    let annotation = format!("{0}/shop::ConfigMap:{0}/lookalike", ns.name);
    ns.kubectl_ok(&["create", "configmap", "lookalike", "--from-literal=k=v"]);
    ns.kubectl_ok(&[
        "label",
        "configmap/lookalike",
        &format!("tether.dev/app={label}"),
    ]);
    ns.kubectl_ok(&[
        "annotate",
        "configmap/lookalike",
        &format!("tether.dev/tracking-id={annotation}"),
    ]);

    repo.git(&["rm", "-q", "app/config.yaml"]);
    repo.git(&["commit", "-q", "-m", "drop the config"]);
    let status = status_where(&apps, "the orphan pruned", |s| {
        s.orphans
            .iter()
            .any(|o| o.object.ends_with("/settings") && o.prune == "Deleted")
    })
    .await;
    let configs = ns.api::<ConfigMap>();
    deleted(&configs, "settings").await;
    let lookalike = status
        .orphans
        .iter()
        .find(|o| o.object.ends_with("/lookalike"));
    assert_eq!(lookalike.unwrap().prune, "kept: not in the app's inventory");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(configs.get_opt("lookalike").await.unwrap().is_some());
    let status = apps.get("shop").await.unwrap().status.unwrap();
    assert!(!status.inventory.iter().any(|e| e.name == "settings"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_emptied_directory_trips_the_circuit_breaker_until_confirmed() {
    let (ns, repo, apps) = synced_app("breaker", json!({"prune": true})).await;
    for path in ["app/config.yaml", "app/web.yaml", "app/service.yaml"] {
        repo.git(&["rm", "-q", path]);
    }
    repo.commit(&[("app/README.md", "moved elsewhere\n")], "empty the app");
    let status = status_where(&apps, "the PruneBlocked condition", |s| {
        has_condition(s, "PruneBlocked", ConditionStatus::True)
    })
    .await;
    let condition = tether_testkit::condition(&status, "PruneBlocked").unwrap();
    assert!(
        condition.message.contains("--allow-mass-prune"),
        "{}",
        condition.message
    );
    assert_eq!(status.inventory.len(), 3);
    eventually("a PruneBlocked event", || async {
        (!events(&ns, "PruneBlocked").await.is_empty()).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(replicas(&ns).await, 2, "nothing deleted");

    // The operator confirms: `tether sync shop --allow-mass-prune`.
    tether_controller::request::request_sync(ns.client.clone(), &ns.name, "shop", true)
        .await
        .unwrap();
    status_where(&apps, "everything pruned", |s| s.inventory.is_empty()).await;
    deleted(&ns.api::<Deployment>(), "web").await;
    // The handled request is cleared after the status is written.
    eventually("the mass-prune confirmation cleared", || async {
        let app = apps.get("shop").await.ok()?;
        (!app
            .annotations()
            .contains_key("tether.dev/allow-mass-prune"))
        .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sync_that_stops_half_way_leaves_accidental_drift_until_it_completes() {
    let (ns, repo, apps) = synced_app("halfway", json!({})).await;
    // An admission policy lets dry-runs through but refuses real writes to
    // Deployments here: validation passes, the apply stops at the Deployment
    // after the ConfigMap went through.
    let name = format!("refuse-deployments-{}", ns.name);
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "request.dryRun == true",
                "message": "test: real writes to Deployments are refused"}]}});
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels":
                {"kubernetes.io/metadata.name": ns.name}}}}});
    for object in [&policy, &binding] {
        ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &object.to_string());
    }
    eventually("the test policy in force", || async {
        let output = ns.kubectl(&["annotate", "deployment/web", "probe=1"]);
        (!output.status.success()).then_some(())
    })
    .await;

    let second = repo.commit(&web(3, "half"), "three replicas, new greeting");
    // A retry of the failed sync marks the operation Running again while
    // the drift stays recorded: wait for a status between two attempts.
    let failed_with_accidental = |s: &ApplicationStatus| {
        let failed = s
            .operation_state
            .as_ref()
            .is_some_and(|o| o.phase == OperationPhase::Failed);
        failed
            && record(&s.drift, "Deployment", "web")
                .is_some_and(|e| e.record.kind.as_str() == "Accidental")
    };
    let status = status_where(
        &apps,
        "the sync Failed and the Deployment recorded as Accidental",
        failed_with_accidental,
    )
    .await;
    let operation = status.operation_state.as_ref().unwrap();
    assert_eq!(
        (operation.phase.as_str(), operation.revision.as_str()),
        ("Failed", second.as_str())
    );
    assert!(
        operation.message.contains("apply stopped half-way"),
        "{}",
        operation.message
    );
    assert!(
        operation
            .changes
            .iter()
            .any(|c| c.object.contains("ConfigMap")),
        "{:?}",
        operation.changes
    );
    assert_eq!(greeting(&ns).await, "half");
    let entry = record(&status.drift, "Deployment", "web").unwrap();
    assert_ne!(entry.response, "BackedOff");
    assert!(
        !status
            .conditions
            .iter()
            .any(|c| c.reason == "FightingAnotherWriter"),
        "{:?}",
        status.conditions
    );
    let field = &entry.record.fields[0];
    assert_eq!(field.path, "spec.replicas");
    assert_eq!(
        (field.desired.clone(), field.live.clone()),
        (Some(json!(3)), Some(json!(2)))
    );
    assert_eq!(field.writer.as_ref().unwrap().manager, "tether");

    // Once writes are allowed again the retry completes the sync.
    for kind in [
        "validatingadmissionpolicybinding",
        "validatingadmissionpolicy",
    ] {
        ns.kubectl_ok(&["delete", kind, &name]);
    }
    status_where(&apps, "Synced at the second commit", |s| {
        s.sync.status == "Synced"
            && s.sync.revision.as_deref() == Some(second.as_str())
            && s.drift.is_empty()
    })
    .await;
    assert_eq!(replicas(&ns).await, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn renaming_an_application_transfers_its_objects_and_deletes_none() {
    let (ns, repo, apps) = synced_app("rename", json!({"prune": true})).await;
    let uids = |ns: &TestNamespace| {
        let output = ns.kubectl(&[
            "get",
            "deployment/web",
            "service/web",
            "configmap/settings",
            "-o",
            "jsonpath={.items[*].metadata.uid}",
        ]);
        String::from_utf8_lossy(&output.stdout).to_string()
    };
    let before = uids(&ns);
    assert_eq!(before.split(' ').count(), 3, "{before}");

    // The rename as a GitOps repository of Applications lands it: the new
    // Application appears, then the old one goes.
    let renamed = json!({"apiVersion": "tether.dev/v1alpha1", "kind": "Application",
        "metadata": {"name": "shop-renamed", "namespace": ns.name},
        "spec": {"source": {"repoURL": repo.url(), "path": "app"},
                 "destination": {"namespace": ns.name},
                 "syncPolicy": {"prune": true}}});
    apps.patch(
        "shop-renamed",
        &kube::api::PatchParams::apply("test"),
        &kube::api::Patch::Apply(&renamed),
    )
    .await
    .unwrap();
    apps.delete("shop", &Default::default()).await.unwrap();

    let label = format!("{}.shop-renamed", ns.name);
    eventually("the objects tracked by the renamed app, Synced", || async {
        let status = apps.get("shop-renamed").await.ok()?.status?;
        let output = ns.kubectl(&[
            "get",
            "deployment,service,configmap",
            "-l",
            &format!("tether.dev/app={label}"),
            "-o",
            "name",
        ]);
        let tracked = String::from_utf8_lossy(&output.stdout).lines().count();
        (status.sync.status == "Synced" && status.inventory.len() == 3 && tracked == 3)
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(uids(&ns), before, "an object was deleted and recreated");
}
