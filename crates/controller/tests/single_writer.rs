//! "The controller is the only writer" end to end: the single-writer
//! admission policy evaluated by the real kube-apiserver against real
//! `kubectl` users, Tether's own writes under it, and other writers
//! reported in the Application's status.
//!
//! Every test binary shares one kube-apiserver and the policy is
//! cluster-scoped, so each test installs its own policy (named after its
//! namespace, bound to that namespace only) and removes it when it ends.

mod support;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::break_glass::in_force;
use support::{HIJACK_GREETING, Repo, config_for, create_app_with, replicas, status_where, web};
use tether_controller::api::{Application, BreakGlass};
use tether_controller::break_glass::request::{self, Opening};
use tether_controller::install;
use tether_controller::single_writer::{self, SingleWriter, service_account_user};
use tether_testkit::{
    TestNamespace, assert_contains, client_for, control_plane, eventually, run_ok,
};

/// The kube-local admin: the tests' own identity, and the one kube-local's
/// controller-manager and kubelet run as (a real cluster's run as
/// `system:kube-controller-manager` and `system:node:*`, which the policy
/// lets through by itself).
const KUBE_LOCAL_ADMIN: &str = "kube-local-admin";

/// Cluster-scoped objects of one test (`kind/name`: its policy, binding
/// and ClusterRoleBinding), deleted when the test ends.
struct ClusterObjects {
    names: Vec<String>,
    kubeconfig: PathBuf,
}

impl Drop for ClusterObjects {
    fn drop(&mut self) {
        let _ = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("delete")
            .args(&self.names)
            .arg("--ignore-not-found")
            .output();
    }
}

/// A namespace with the web app synced by a controller running as Tether's
/// service account, the policy enforced there, and two people who may
/// edit in the namespace as far as RBAC goes: alice (a developer) and bob
/// (in the break-glass group).
struct Guarded {
    ns: TestNamespace,
    repo: Repo,
    apps: Api<Application>,
    alice: PathBuf,
    bob: PathBuf,
    _cluster_objects: ClusterObjects,
}

async fn guarded_app(prefix: &str, policy: serde_json::Value) -> Guarded {
    let ns = TestNamespace::create(prefix).await;
    let repo = Repo::new();
    repo.commit(&web(2, "hello"), "first");

    // Run the controller as Tether's service account would authenticate.
    install::install(ns.client.clone(), &ns.name).await.unwrap();
    let plane = control_plane();
    let controller = service_account_user(&ns.name);
    let identity = plane.user_kubeconfig(&controller, &["system:serviceaccounts"]);
    let client = client_for(&identity).await;
    // install binds this namespace's service account on its own (bindings
    // are named after the namespace); remove them when the test ends.
    let mut cluster_objects = ClusterObjects {
        names: vec![
            format!("clusterrolebinding/tether-controller-{}", ns.name),
            format!("clusterrolebinding/tether-applier-{}", ns.name),
        ],
        kubeconfig: ns.kubeconfig.clone(),
    };
    // RBAC sees new bindings through an informer: wait for it.
    let everywhere: Api<ConfigMap> = Api::all(client.clone());
    eventually("RBAC for the service account", || async {
        everywhere.list(&Default::default()).await.ok().map(|_| ())
    })
    .await;
    let config = config_for(&ns);
    tokio::spawn(async move {
        if let Err(error) = tether_controller::run(client, config).await {
            panic!("controller stopped: {error}");
        }
    });
    let apps = create_app_with(&ns, &repo, policy).await;
    status_where(&apps, "Synced with 2 objects in the inventory", |s| {
        s.sync.status == "Synced" && s.inventory.len() == 2
    })
    .await;

    let alice = plane.user_kubeconfig(&format!("alice-{}", ns.name), &["devs"]);
    let bob = plane.user_kubeconfig(&format!("bob-{}", ns.name), &["tether:break-glass"]);
    let subject = |path: &PathBuf| {
        path.file_name().unwrap().to_str().unwrap()["kubeconfig-".len()..].to_string()
    };
    ns.kubectl_ok(&[
        "create",
        "rolebinding",
        "people",
        "--clusterrole=edit",
        &format!("--user={}", subject(&alice)),
        &format!("--user={}", subject(&bob)),
    ]);

    let rule = SingleWriter {
        name: format!("tether-single-writer-{}", ns.name),
        namespaces: vec![ns.name.clone()],
        ..SingleWriter::new(&ns.name).with_writer(KUBE_LOCAL_ADMIN)
    };
    cluster_objects.names.extend([
        format!("validatingadmissionpolicybinding/{}", rule.name),
        format!("validatingadmissionpolicy/{}", rule.name),
    ]);
    single_writer::enforce(ns.client.clone(), &rule)
        .await
        .unwrap();
    // The API server picks a new policy (and alice's new RoleBinding) up
    // from its informers: wait until a (dry-run) change by alice is
    // refused by the policy, not for want of RBAC.
    eventually("the policy in force", || async {
        let probe = ns.kubectl_as(
            &alice,
            &["label", "configmap/settings", "probe=1", "--dry-run=server"],
        );
        let stderr = String::from_utf8_lossy(&probe.stderr);
        (!probe.status.success() && stderr.contains("is managed by Tether app")).then_some(())
    })
    .await;
    Guarded {
        ns,
        repo,
        apps,
        alice,
        bob,
        _cluster_objects: cluster_objects,
    }
}

/// Runs a command that the policy must refuse; returns kubectl's stderr.
fn refused(ns: &TestNamespace, output: Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{what} was let through");
    assert!(
        stderr.contains("is managed by Tether app")
            && stderr.contains(&format!("{}/shop", ns.name))
            && stderr.contains("tether break-glass open")
            && stderr.contains("tether:break-glass"),
        "{what}: {stderr}"
    );
    stderr
}

async fn greeting(ns: &TestNamespace) -> Option<String> {
    let map = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .get_opt("settings")
        .await
        .unwrap()?;
    map.data?.get("greeting").cloned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plain_users_edit_patch_and_delete_are_rejected_and_a_break_glass_member_passes() {
    let g = guarded_app("deny", json!({})).await;
    let ns = &g.ns;

    // kubectl edit, driven by an editor that rewrites the image.
    let edit = ns
        .kubectl_command_as(&g.alice, &["edit", "deployment/web"])
        .env("KUBE_EDITOR", "sed -i s/nginx:1.27/nginx:1.28/")
        .output()
        .unwrap();
    let stderr = refused(ns, edit, "kubectl edit by alice");
    println!("kubectl edit by a plain user: {stderr}");
    assert_contains(
        &stderr,
        &format!(
            "Deployment {}/web is managed by Tether app {}/shop",
            ns.name, ns.name
        ),
    );
    let patch = ns.kubectl_as(
        &g.alice,
        &[
            "patch",
            "deployment/web",
            "-p",
            r#"{"spec":{"replicas":4}}"#,
        ],
    );
    refused(ns, patch, "kubectl patch by alice");
    let patch = ns.kubectl_as(&g.alice, &HIJACK_GREETING);
    refused(ns, patch, "kubectl patch of the ConfigMap by alice");
    let delete = ns.kubectl_as(&g.alice, &["delete", "configmap/settings"]);
    refused(ns, delete, "kubectl delete by alice");
    assert_eq!(greeting(ns).await.as_deref(), Some("hello"));

    // The Scale object `kubectl scale` sends carries no labels, so no label
    // selector sees it: the API server lets it through and self-heal
    // reverts it (and attributes it).
    ns.kubectl_ok_as(&g.alice, &["scale", "deployment/web", "--replicas=5"]);
    eventually("the scale reverted", || async {
        (replicas(ns).await == 2).then_some(())
    })
    .await;

    // Objects Tether does not manage are not the policy's business.
    ns.kubectl_ok_as(&g.alice, &["create", "configmap", "scratch"]);
    ns.kubectl_ok_as(&g.alice, &["label", "configmap/scratch", "team=payments"]);
    ns.kubectl_ok_as(&g.alice, &["delete", "configmap/scratch"]);

    // A break-glass member's change passes, is recorded as drift with its
    // writer, and self-heal (Tether writing under the policy) reverts it.
    ns.kubectl_ok_as(
        &g.bob,
        &[
            "patch",
            "configmap/settings",
            "-p",
            r#"{"data":{"greeting":"break-glass"}}"#,
        ],
    );
    let status = status_where(&g.apps, "bob's patch recorded and healed", |s| {
        s.last_drift.iter().any(|e| {
            e.record.object.name == "settings"
                && e.record.fields[0].live == Some(json!("break-glass"))
        })
    })
    .await;
    let entry = status
        .last_drift
        .iter()
        .find(|e| e.record.object.name == "settings")
        .unwrap();
    assert_eq!(
        entry.record.fields[0].writer.as_ref().unwrap().manager,
        "kubectl-patch"
    );
    eventually("bob's patch reverted", || async {
        (greeting(ns).await.as_deref() == Some("hello")).then_some(())
    })
    .await;

    // Inside a break-glass window the member's `kubectl edit` passes, is
    // recorded as Emergency drift with its writer, and is not reverted.
    // bob opens it himself: the break-glass group may, and the window
    // names him as the API server authenticated him.
    let bob_client = client_for(&g.bob).await;
    let window = request::open(
        &bob_client,
        Opening {
            namespace: ns.name.clone(),
            app: "shop".into(),
            resources: vec![request::parse_resource("Deployment/web").unwrap()],
            reason: "INC-7: image hotfix".into(),
            ttl: Duration::from_secs(600),
            max_ttl: tether_core::window::DEFAULT_MAX_TTL,
        },
    )
    .await
    .unwrap();
    in_force(ns, &window.name_any()).await;
    assert_eq!(
        window.spec.opened_by.username,
        format!("bob-{}", ns.name),
        "{:?}",
        window.spec.opened_by
    );
    run_ok(
        ns.kubectl_command_as(&g.bob, &["edit", "deployment/web"])
            .env("KUBE_EDITOR", "sed -i s/nginx:1.27/nginx:1.28/"),
    );
    let windows: Api<BreakGlass> = Api::namespaced(ns.client.clone(), &ns.name);
    eventually("bob's edit recorded as Emergency", || async {
        let status = windows.get(&window.name_any()).await.ok()?.status?;
        status
            .records
            .iter()
            .any(|r| {
                r.object.name == "web"
                    && r.fields.iter().any(|f| {
                        f.live == Some(json!("nginx:1.28"))
                            && f.writer
                                .as_ref()
                                .is_some_and(|w| w.manager == "kubectl-edit")
                    })
            })
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let image = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name)
        .get("web")
        .await
        .unwrap()
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers[0]
        .image
        .clone();
    assert_eq!(image.as_deref(), Some("nginx:1.28"));
    drop(g.repo);
}

#[tokio::test(flavor = "multi_thread")]
async fn tethers_own_sync_self_heal_and_prune_still_work_under_the_policy() {
    let g = guarded_app("own", json!({"prune": true})).await;
    let ns = &g.ns;

    // Self-heal: an admin's scale (let through as a writer) is reverted.
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=4"]);
    eventually("the scale reverted", || async {
        (replicas(ns).await == 2).then_some(())
    })
    .await;

    // Sync: a new commit changes both objects.
    let files = web(3, "bonjour");
    g.repo.commit(&files, "three replicas, French");
    eventually("the commit applied", || async {
        (replicas(ns).await == 3 && greeting(ns).await.as_deref() == Some("bonjour")).then_some(())
    })
    .await;

    // Prune: the ConfigMap leaves Git and Tether deletes it.
    std::fs::remove_file(g.repo.dir.join("app/config.yaml")).unwrap();
    g.repo.git(&["commit", "-qam", "no more settings"]);
    eventually("the ConfigMap pruned", || async {
        greeting(ns).await.is_none().then_some(())
    })
    .await;
    let status = status_where(&g.apps, "Synced after the prune", |s| {
        s.sync.status == "Synced" && s.orphans.iter().any(|o| o.prune == "Deleted")
    })
    .await;
    assert!(
        status
            .conditions
            .iter()
            .all(|c| c.type_ != "Reconciled" || c.status == "True"),
        "{:?}",
        status.conditions
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn operators_may_sync_and_roll_back_an_app_another_app_manages_but_not_change_it() {
    let g = guarded_app("requests", json!({})).await;
    let ns = &g.ns;
    // shop as the parent of an app of apps would have applied it.
    ns.kubectl_ok(&["label", "application/shop", "tether.dev/app=apps"]);
    // alice may ask for syncs and rollbacks of the namespace's apps.
    ns.kubectl_ok(&[
        "create",
        "role",
        "app-requests",
        "--verb=get,patch",
        "--resource=applications.tether.dev",
    ]);
    ns.kubectl_ok(&[
        "create",
        "rolebinding",
        "app-requests",
        "--role=app-requests",
        &format!("--user=alice-{}", ns.name),
    ]);
    let alice = client_for(&g.alice).await;

    // RBAC sees the new binding through an informer: wait until alice's
    // request is judged by the policy, not refused for want of RBAC.
    let asked = eventually("alice's sync request past RBAC", || async {
        let asked =
            tether_controller::request::request_sync(alice.clone(), &ns.name, "shop", false).await;
        match &asked {
            Err(error) if error.to_string().contains("cannot patch") => None,
            _ => Some(asked),
        }
    })
    .await;
    asked.expect("a sync request is not drift");
    // Roll back to the first of two commits: a pin Git does not match
    // stays until it is cleared (the controller lifts one Git matches).
    g.repo.commit(&web(3, "bonjour"), "three replicas, French");
    let status = status_where(&g.apps, "both commits in the history", |s| {
        s.history.len() == 2
    })
    .await;
    let first = status.history.iter().map(|e| e.id).min().unwrap();
    let pin = tether_controller::rollback::pin(&alice, &ns.name, "shop", Some(first), "INC-9")
        .await
        .expect("a rollback is not drift");
    assert_eq!(pin.by, format!("alice-{}", ns.name));
    tether_controller::rollback::clear(&alice, &ns.name, "shop")
        .await
        .expect("lifting a pin is not drift");

    // What the parent declares stays the parent's: the spec, labels and
    // other annotations, with or without a request beside them.
    let spec = ns.kubectl_as(
        &g.alice,
        &[
            "patch",
            "application/shop",
            "--type=merge",
            "-p",
            r#"{"spec":{"source":{"path":"elsewhere"}}}"#,
        ],
    );
    refused(ns, spec, "alice's change of the source path");
    let label = ns.kubectl_as(&g.alice, &["label", "application/shop", "team=payments"]);
    refused(ns, label, "alice's label");
    let annotated = ns.kubectl_as(
        &g.alice,
        &[
            "annotate",
            "application/shop",
            "team=payments",
            "tether.dev/sync-requested-at=2026-12-07T00:00:00Z",
        ],
    );
    refused(ns, annotated, "alice's annotation beside a sync request");
    let app = g.apps.get("shop").await.unwrap();
    assert_eq!(app.spec.source.path, "app");
    assert!(!app.labels().contains_key("team"));
    drop(g.repo);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_writer_is_listed_in_status_until_self_heal_takes_its_fields_back() {
    let (ns, _repo, apps) = support::web_app("writers", json!({"selfHeal": false})).await;
    status_where(&apps, "Synced", |s| {
        s.sync.status == "Synced" && s.inventory.len() == 2
    })
    .await;
    // The controller-manager has had time to stamp the Deployment's
    // revision and status: Kubernetes' own writes are not other writers.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status = apps.get("shop").await.unwrap().status.unwrap();
    assert!(
        status.other_writers.is_empty(),
        "{:?}",
        status.other_writers
    );

    ns.kubectl_ok(&HIJACK_GREETING);
    let status = status_where(&apps, "kubectl-patch listed as another writer", |s| {
        !s.other_writers.is_empty()
    })
    .await;
    let entry = &status.other_writers[0];
    println!(
        "other writer: {}",
        serde_json::to_string(&status.other_writers).unwrap()
    );
    assert_eq!(entry.object, format!("ConfigMap {}/settings", ns.name));
    assert_eq!(entry.writer.writer.manager, "kubectl-patch");
    assert_eq!(entry.writer.paths, ["data.greeting"]);
    assert_eq!(entry.writer.fields, 1);
    assert!(entry.writer.writer.time.is_some());

    // Turn self-heal on: the patch is reverted, kubectl-patch owns nothing
    // any more and drops off the list.
    apps.patch(
        "shop",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"syncPolicy": {"selfHeal": true}}})),
    )
    .await
    .unwrap();
    status_where(&apps, "no other writer after the revert", |s| {
        s.other_writers.is_empty() && s.sync.status == "Synced"
    })
    .await;
    assert_eq!(greeting(&ns).await.as_deref(), Some("hello"));
}
