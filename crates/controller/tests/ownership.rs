//! What an Application may take: never another app's objects, an object
//! made by hand only when the app opts in (and then never prunes it unless
//! it opts in again), nothing outside its destination namespace. Each test
//! replays an attack from the security review on the real control plane.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::{Value, json};
use support::{Repo, app, started, status_where};
use tether_controller::api::{Application, ApplicationStatus};
use tether_testkit::{TestNamespace, status_of};

fn config_map(name: &str, namespace: Option<&str>, value: &str) -> String {
    let namespace = namespace
        .map(|ns| format!("  namespace: {ns}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{namespace}data:\n  owner: \"{value}\"\n"
    )
}

fn refused_with(status: &ApplicationStatus, reason: &str) -> Option<String> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "Reconciled" && c.status == "False" && c.reason == reason)
        .map(|c| c.message.clone())
}

async fn owner_value(ns: &TestNamespace, namespace: &str, name: &str) -> Option<String> {
    let found = Api::<ConfigMap>::namespaced(ns.client.clone(), namespace)
        .get_opt(name)
        .await
        .unwrap()?;
    Some(found.data?.get("owner")?.clone())
}

/// Creates Application `name` in `ns` for `path` of `repo` with `policy`.
async fn create(
    ns: &TestNamespace,
    name: &str,
    repo: &Repo,
    path: &str,
    policy: Value,
) -> Api<Application> {
    app(ns, name, repo, path)
        .sync_policy(policy)
        .apply(&ns.client)
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_object_another_app_manages_is_a_conflict_naming_both_apps() {
    let ns = started("takeover").await;
    let repo = Repo::new();
    repo.commit(
        &[
            ("bob/config.yaml", config_map("bob-config", None, "bob")),
            ("alice/own.yaml", config_map("alice-config", None, "alice")),
            ("alice/bob.yaml", config_map("bob-config", None, "alice")),
        ],
        "alice declares bob's ConfigMap",
    );
    create(&ns, "bob", &repo, "bob", json!({})).await;
    status_of(&ns.api(), "bob", "bob Synced", |s| {
        s.sync.status == "Synced"
    })
    .await;

    create(&ns, "alice", &repo, "alice", json!({"prune": true})).await;
    let alice = status_of(&ns.api(), "alice", "alice refused", |s| {
        refused_with(s, "OwnershipConflict").is_some()
    })
    .await;
    let message = refused_with(&alice, "OwnershipConflict").unwrap();
    assert!(
        message.contains(&format!("ConfigMap {}/bob-config", ns.name))
            && message.contains(&format!("Application {}/bob", ns.name)),
        "{message}"
    );
    // Nothing of alice's commit was applied, and bob keeps its object.
    assert_eq!(owner_value(&ns, &ns.name, "alice-config").await, None);
    assert_eq!(
        owner_value(&ns, &ns.name, "bob-config").await.as_deref(),
        Some("bob")
    );
    let bob = status_of(&ns.api(), "bob", "bob still Synced", |s| {
        s.sync.status == "Synced"
    })
    .await;
    assert_eq!(bob.inventory.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_object_made_by_hand_is_adopted_only_on_opt_in_and_never_pruned() {
    let ns = started("handmade").await;
    ns.kubectl_ok(&[
        "create",
        "configmap",
        "victim",
        "--from-literal=owner=admin",
    ]);
    let repo = Repo::new();
    repo.commit(
        &[
            ("app/victim.yaml", config_map("victim", None, "admin")),
            ("app/other.yaml", config_map("other", None, "app")),
        ],
        "declare the admin's ConfigMap",
    );
    let apps = create(&ns, "shop", &repo, "app", json!({"prune": true})).await;
    let refused = status_where(&apps, "refused: not adoptable", |s| {
        refused_with(s, "OwnershipConflict").is_some()
    })
    .await;
    let message = refused_with(&refused, "OwnershipConflict").unwrap();
    assert!(message.contains("Tether did not create it"), "{message}");
    assert_eq!(owner_value(&ns, &ns.name, "other").await, None);

    // The app opts in: the object is taken over and marked adopted.
    create(
        &ns,
        "shop",
        &repo,
        "app",
        json!({"prune": true, "adoptExisting": true}),
    )
    .await;
    status_where(&apps, "Synced after opting in", |s| {
        s.sync.status == "Synced" && s.inventory.len() == 2
    })
    .await;
    let victim = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .get("victim")
        .await
        .unwrap();
    assert_eq!(
        victim
            .metadata
            .annotations
            .unwrap()
            .get("tether.dev/adopted")
            .map(String::as_str),
        Some("true")
    );

    // Removed from Git with prune on: kept, because Tether did not create it.
    std::fs::remove_file(repo.dir.join("app/victim.yaml")).unwrap();
    repo.commit_all("stop declaring it");
    let kept = status_where(&apps, "the adopted orphan kept", |s| {
        s.orphans
            .iter()
            .any(|o| o.object.ends_with("/victim") && o.prune.to_string().contains("adopted"))
    })
    .await;
    assert!(kept.sync.status == "Synced", "{kept:?}");
    assert_eq!(
        owner_value(&ns, &ns.name, "victim").await.as_deref(),
        Some("admin")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_object_outside_the_destination_namespace_is_refused() {
    let ns = started("outside").await;
    let repo = Repo::new();
    let name = format!("victim-{}", ns.name);
    repo.commit(
        &[
            ("app/mine.yaml", config_map("mine", None, "app")),
            (
                "app/system.yaml",
                config_map(&name, Some("kube-system"), "attacker"),
            ),
        ],
        "reach into kube-system",
    );
    let apps = create(&ns, "shop", &repo, "app", json!({})).await;
    let refused = status_where(&apps, "refused: outside the destination", |s| {
        refused_with(s, "NamespaceNotAllowed").is_some()
    })
    .await;
    let message = refused_with(&refused, "NamespaceNotAllowed").unwrap();
    assert!(
        message.contains(&format!("ConfigMap kube-system/{name}")),
        "{message}"
    );
    assert_eq!(owner_value(&ns, "kube-system", &name).await, None);
    assert_eq!(owner_value(&ns, &ns.name, "mine").await, None);
}
