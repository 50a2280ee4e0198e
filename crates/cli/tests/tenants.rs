//! Two tenants on one cluster, served by one controller that runs as its
//! own ServiceAccount with the RBAC `tether install --tenant-namespace`
//! gives it: each tenant's app applies as its own ServiceAccount, neither
//! can take over, overwrite or prune what the other manages, and the
//! controller cannot impersonate anyone outside the tenant namespaces.
//!
//! One test in its own binary: its controller watches every namespace.

mod support;

use std::path::PathBuf;

use kube::api::Api;
use serde_json::{Value, json};
use support::tenancy::{Project, refused, service_account};
use support::{Repo, Running, bind_cluster_role, config_map, tether_command, tether_ok};
use tether_controller::api::Application;
use tether_core::SyncStatus;
use tether_testkit::{TestNamespace, application, assert_contains, run_ok, status_of};

/// A kubeconfig like the test's, but authenticated as ServiceAccount
/// `name` of `ns` (a bound token), written under `ns`'s cache directory.
fn kubeconfig_as(ns: &TestNamespace, name: &str) -> PathBuf {
    let token = ns.kubectl_ok(&["create", "token", name, "--duration", "1h"]);
    let dir = ns.cache_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.kubeconfig"));
    std::fs::copy(&ns.kubeconfig, &path).unwrap();
    let kubectl = |args: &[&str]| {
        run_ok(
            std::process::Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&path)
                .args(args),
        )
    };
    kubectl(&["config", "set-credentials", name, "--token", token.trim()]);
    kubectl(&["config", "set-context", "--current", "--user", name]);
    path
}

/// Application `shop` of `ns` for `repo`'s `app/`, applying as `deployer`.
fn create_app(ns: &TestNamespace, repo: &Repo, destination: Value) {
    let mut app = application("shop", &ns.name, &repo.url(), "app")
        .interval("1s")
        .sync_policy(json!({"automated": true, "prune": true}))
        .manifest()
        .clone();
    app["spec"]["serviceAccountName"] = json!("deployer");
    app["spec"]["destination"] = destination;
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &app.to_string());
}

fn config_map_at(name: &str, namespace: &str, greeting: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  greeting: {greeting:?}\n"
    )
}

/// Tenant `who`'s repository: its `app/` holds ConfigMap `own` (greeting
/// `who`) and `shared`'s `settings` (greeting `from-WHO`); and that commit.
fn declaring_settings(shared: &TestNamespace, who: &str) -> (Repo, String) {
    let repo = Repo::new();
    let commit = repo.commit(
        &[
            ("app/own.yaml", config_map("own", who)),
            (
                "app/settings.yaml",
                config_map_at("settings", &shared.name, &format!("from-{who}")),
            ),
        ],
        who,
    );
    (repo, commit)
}

#[tokio::test(flavor = "multi_thread")]
async fn two_tenants_declaring_one_object_never_overwrite_or_prune_each_other() {
    let controller_ns = TestNamespace::create("tenants-ctl").await;
    let (a, b) = (
        TestNamespace::create("tenant-a").await,
        TestNamespace::create("tenant-b").await,
    );
    let shared = TestNamespace::create("shared").await;
    let outsider = TestNamespace::create("outsider").await;
    tether_ok(
        &controller_ns,
        &[
            "install",
            "--namespace",
            &controller_ns.name,
            "--tenant-namespace",
            &a.name,
            "--tenant-namespace",
            &b.name,
        ],
    );
    // Each tenant's deployer may edit its own namespace and `shared`.
    for tenant in [&a, &b, &outsider] {
        service_account(tenant, "deployer", "edit");
        bind_cluster_role(
            &shared,
            "rolebinding",
            &format!("deployer-{}", tenant.name),
            "edit",
            &format!("{}:deployer", tenant.name),
        );
    }
    let _projects: Vec<Project> = [&a, &b]
        .iter()
        .map(|tenant| {
            Project::apply(
                tenant,
                &tenant.name,
                json!({"applicationNamespaces": [tenant.name], "sourceRepos": ["file://**"],
                       "allowFileSources": true,
                       "destinationNamespaces": [tenant.name, shared.name]}),
            )
        })
        .collect();
    // The controller runs as its ServiceAccount, everywhere.
    let kubeconfig = kubeconfig_as(&controller_ns, "tether-controller");
    let cache = controller_ns.cache_dir().join("controller");
    let mut command = tether_command(
        &controller_ns,
        &[
            "run",
            "--lease-namespace",
            &controller_ns.name,
            "--secrets-namespace",
            &controller_ns.name,
            "--identity",
            "tenants",
            "--resync-seconds",
            "30",
            "--cache-dir",
            cache.to_str().unwrap(),
        ],
    );
    command.env("TETHER_KUBECONFIG", &kubeconfig);
    let mut _controller = Running::spawn(command);
    _controller.leftovers.push(cache);

    let destination = |tenant: &TestNamespace| json!({"namespace": tenant.name, "allowNamespaces": [shared.name]});
    // Tenant a declares shared/settings first, and gets it.
    let (repo_a, first_a) = declaring_settings(&shared, "a");
    create_app(&a, &repo_a, destination(&a));
    let apps_a: Api<Application> = a.api();
    status_of(&apps_a, "shop", "a Synced", |s| {
        s.sync.status == SyncStatus::Synced && s.sync.revision.as_deref() == Some(first_a.as_str())
    })
    .await;
    assert_eq!(
        shared.jsonpath("configmap/settings", "{.data.greeting}"),
        "from-a"
    );

    // Tenant b declares the same object: refused as a's, nothing applied.
    let (repo_b, _) = declaring_settings(&shared, "b");
    create_app(&b, &repo_b, destination(&b));
    let apps_b: Api<Application> = b.api();
    let (message, synced) = refused(&apps_b, "OwnershipConflict").await;
    println!("tenant b: {message}");
    assert_contains(
        &message,
        &format!(
            "ConfigMap {}/settings is managed by Application {}/shop",
            shared.name, a.name
        ),
    );
    assert_eq!(synced, None);
    assert!(!b.kubectl(&["get", "configmap", "own"]).status.success());
    let status_b = b
        .get::<Application>("shop")
        .await
        .status
        .unwrap_or_default();
    assert!(
        status_b.inventory.is_empty(),
        "b reports nothing as its own: {:?}",
        status_b.inventory
    );

    // a drops its own ConfigMap: pruned; shared/settings still a's, unchanged.
    repo_a.git(&["rm", "-q", "app/own.yaml"]);
    let second_a = repo_a.commit_all("a without own");
    status_of(&apps_a, "shop", "a Synced again", |s| {
        s.sync.revision.as_deref() == Some(second_a.as_str())
    })
    .await;
    assert!(!a.kubectl(&["get", "configmap", "own"]).status.success());
    assert_eq!(
        shared.jsonpath("configmap/settings", "{.data.greeting}"),
        "from-a",
        "never overwritten by b"
    );

    // Outside the tenant namespaces the controller impersonates nobody.
    let repo_o = Repo::new();
    repo_o.commit(&[("app/own.yaml", config_map("own", "o"))], "o");
    create_app(&outsider, &repo_o, json!({"namespace": outsider.name}));
    let apps_o: Api<Application> = outsider.api();
    let status = status_of(&apps_o, "shop", "refused: cannot impersonate", |s| {
        s.conditions
            .iter()
            .any(|c| c.status == "False" && c.message.contains("impersonate"))
    })
    .await;
    println!("outsider: {:?}", status.conditions);
    assert!(
        !outsider
            .kubectl(&["get", "configmap", "own"])
            .status
            .success()
    );
}
