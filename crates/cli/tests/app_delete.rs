//! `tether app delete`, driven as an operator would against a real
//! `tether run`: `--cascade` deletes exactly the objects the app owns,
//! then the app — also when the controller was down at the time; without
//! it nothing is deleted and the output says what was left behind.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use support::{Repo, config_map, create_app, run_controller, tether_ok};
use tether_controller::api::Application;
use tether_testkit::{TestNamespace, application, eventually, status_of};

/// A namespace with Tether installed; app `shop` owning ConfigMaps
/// `settings` and `extra`, app `other` owning ConfigMap `others`, and a
/// hand-made ConfigMap `hand-made` beside them, all in the namespace.
async fn two_apps_and_a_hand_made_object(prefix: &str) -> (TestNamespace, Repo) {
    let ns = TestNamespace::create(prefix).await;
    tether_ok(&ns, &["install", "--namespace", &ns.name]);
    let repo = Repo::new();
    repo.commit(
        &[
            ("app/settings.yaml", config_map("settings", "hello")),
            ("app/extra.yaml", config_map("extra", "hello")),
            ("other/others.yaml", config_map("others", "hello")),
        ],
        "two apps",
    );
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &config_map("hand-made", "mine"));
    create_app(&ns, &repo, json!({}));
    let other = application("other", &ns.name, &repo.url(), "other");
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &other.manifest().to_string());
    (ns, repo)
}

async fn wait_synced(ns: &TestNamespace) {
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &ns.name);
    for name in ["shop", "other"] {
        status_of(&apps, name, "Synced with an inventory", |s| {
            s.sync.status == "Synced" && !s.inventory.is_empty()
        })
        .await;
    }
}

/// The ConfigMaps in the namespace, by name, sorted.
async fn config_maps(ns: &TestNamespace) -> Vec<String> {
    let mut names: Vec<String> = ns
        .list::<ConfigMap>()
        .await
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|name| name != "kube-root-ca.crt")
        .collect();
    names.sort();
    names
}

async fn wait_until_gone(ns: &TestNamespace, app: &str) {
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &ns.name);
    eventually(&format!("Application {app} to be gone"), || async {
        apps.get_opt(app).await.unwrap().is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn app_delete_cascade_removes_the_apps_objects_and_nothing_else() {
    let (ns, _repo) = two_apps_and_a_hand_made_object("cli-cascade").await;
    let _controller = run_controller(&ns, "cascade");
    wait_synced(&ns).await;

    let said = tether_ok(&ns, &["app", "delete", "shop", "--cascade", "-n", &ns.name]);
    assert!(said.contains("deletes the 2 object(s) it owns"), "{said}");
    wait_until_gone(&ns, "shop").await;
    assert_eq!(config_maps(&ns).await, ["hand-made", "others"]);
}

#[tokio::test]
async fn a_plain_app_delete_lists_what_it_leaves_and_removes_nothing() {
    let (ns, _repo) = two_apps_and_a_hand_made_object("cli-delete-plain").await;
    let _controller = run_controller(&ns, "plain");
    wait_synced(&ns).await;

    let said = tether_ok(&ns, &["app", "delete", "shop", "-n", &ns.name]);
    let left = format!(
        "Application {0}/shop deleted; left 2 object(s) in place: ConfigMap {0}/extra, \
         ConfigMap {0}/settings; use --cascade to delete them",
        ns.name
    );
    assert_eq!(said.trim(), left);
    wait_until_gone(&ns, "shop").await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(
        config_maps(&ns).await,
        ["extra", "hand-made", "others", "settings"]
    );
}

#[tokio::test]
async fn an_app_deleted_while_the_controller_is_down_goes_when_it_comes_back() {
    let (ns, _repo) = two_apps_and_a_hand_made_object("cli-cascade-down").await;
    let mut controller = run_controller(&ns, "down");
    wait_synced(&ns).await;
    controller.kill();

    tether_ok(&ns, &["app", "delete", "shop", "--cascade", "-n", &ns.name]);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &ns.name);
    let waiting = apps.get("shop").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert_eq!(
        config_maps(&ns).await,
        ["extra", "hand-made", "others", "settings"],
        "nothing is deleted while no controller runs"
    );

    let _controller = run_controller(&ns, "down");
    wait_until_gone(&ns, "shop").await;
    assert_eq!(config_maps(&ns).await, ["hand-made", "others"]);
}
