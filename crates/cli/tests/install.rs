//! `tether install` and `tether uninstall` as an operator runs them: the
//! controller's least-privilege RBAC checked with `kubectl auth can-i`,
//! concurrent installs, the `--dry-run` manifests, and an uninstall that
//! leaves every applied object in place.

mod support;

use std::process::Command;

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::Api;
use serde_json::{Value, json};
use support::{create_app, installed, run_controller, settings_repo, tether, tether_ok, text};
use tether_controller::api::Application;
use tether_testkit::{TestNamespace, eventually, status_of};

/// `kubectl auth can-i ARGS` as the controller's service account of
/// `controller_ns`: whether it may.
/// Whether the controller's ServiceAccount exists in `ns`.
async fn has_controller_account(ns: &TestNamespace) -> bool {
    let accounts: Api<ServiceAccount> = ns.api();
    accounts
        .get_opt("tether-controller")
        .await
        .unwrap()
        .is_some()
}

fn can_i(ns: &TestNamespace, controller_ns: &str, args: &[&str]) -> bool {
    let output = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&ns.kubeconfig)
        .args(["auth", "can-i"])
        .args(args)
        .arg(format!(
            "--as=system:serviceaccount:{controller_ns}:tether-controller"
        ))
        .output()
        .expect("kubectl runs");
    String::from_utf8_lossy(&output.stdout).trim() == "yes"
}

#[tokio::test]
async fn the_controller_service_account_may_do_exactly_what_the_can_i_table_says() {
    let ns = installed("can-i").await;
    let me = ns.name.as_str();
    // tether-applier is filled in by the aggregation controller, soon.
    eventually("tether-applier to aggregate the default grants", || async {
        can_i(&ns, me, &["create", "deployments", "-n", "default"]).then_some(())
    })
    .await;
    let table: &[(&[&str], bool)] = &[
        (&["list", "deployments", "--all-namespaces"], true),
        (&["watch", "pods", "--all-namespaces"], true),
        (&["create", "deployments", "-n", "default"], true),
        (&["delete", "configmaps", "-n", "default"], true),
        (&["patch", "services", "-n", "default"], true),
        (
            &[
                "patch",
                "applications.tether.dev",
                "--subresource=status",
                "-n",
                "default",
            ],
            true,
        ),
        (
            &[
                "update",
                "applications.tether.dev",
                "--subresource=finalizers",
                "-n",
                "default",
            ],
            true,
        ),
        (
            &[
                "patch",
                "breakglasses.tether.dev",
                "--subresource=status",
                "-n",
                "default",
            ],
            true,
        ),
        (
            &["watch", "applicationsets.tether.dev", "-n", "default"],
            true,
        ),
        (
            &[
                "patch",
                "applicationsets.tether.dev",
                "--subresource=status",
                "-n",
                "default",
            ],
            true,
        ),
        (
            &["create", "applicationsets.tether.dev", "-n", "default"],
            false,
        ),
        (&["create", "leases.coordination.k8s.io", "-n", me], true),
        (&["create", "events", "-n", "default"], true),
        (&["create", "events.events.k8s.io", "-n", "default"], true),
        (&["create", "configmaps", "-n", me], true),
        (&["get", "secrets", "-n", me], true),
        (&["create", "namespaces"], true),
        // Who may read /metrics; it reads no metrics itself.
        (&["create", "tokenreviews.authentication.k8s.io"], true),
        (
            &["create", "subjectaccessreviews.authorization.k8s.io"],
            true,
        ),
        (&["get", "/metrics"], false),
        // Its own pods' leader label; no other pod, no exec.
        (&["patch", "pods", "-n", me], true),
        (&["patch", "pods", "-n", "default"], false),
        (&["create", "pods", "--subresource=exec", "-n", me], false),
        (&["delete", "pods", "-n", me], false),
        (&["create", "clusterrolebindings"], false),
        (&["create", "rolebindings", "-n", "default"], false),
        (&["escalate", "clusterroles"], false),
        (&["bind", "clusterroles"], false),
        (&["impersonate", "users"], false),
        (&["impersonate", "serviceaccounts", "-n", "default"], false),
        (&["get", "secrets", "-n", "kube-system"], false),
        (&["list", "secrets", "--all-namespaces"], false),
        (&["create", "secrets", "-n", "default"], false),
        (
            &["create", "customresourcedefinitions.apiextensions.k8s.io"],
            false,
        ),
        (
            &["create", "leases.coordination.k8s.io", "-n", "default"],
            false,
        ),
        (&["delete", "namespaces"], false),
        (
            &[
                "create",
                "validatingadmissionpolicies.admissionregistration.k8s.io",
            ],
            false,
        ),
    ];
    let wrong: Vec<String> = table
        .iter()
        .filter(|(args, expected)| can_i(&ns, me, args) != *expected)
        .map(|(args, expected)| format!("can-i {} should be {expected}", args.join(" ")))
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[tokio::test]
async fn secrets_namespace_grants_reading_secrets_there_only() {
    let ns = TestNamespace::create("secrets-grant").await;
    let shop = TestNamespace::create("secrets-shop").await;
    tether_ok(
        &ns,
        &[
            "install",
            "--namespace",
            &ns.name,
            "--secrets-namespace",
            &shop.name,
        ],
    );
    // RBAC learns of a new binding from its informer, a moment later.
    eventually(
        "listing secrets in the secrets namespace granted",
        || async { can_i(&ns, &ns.name, &["list", "secrets", "-n", &shop.name]).then_some(()) },
    )
    .await;
    assert!(!can_i(
        &ns,
        &ns.name,
        &["create", "secrets", "-n", &shop.name]
    ));
    assert!(!can_i(&ns, &ns.name, &["get", "secrets", "-n", "default"]));
}

#[tokio::test]
async fn two_concurrent_installs_into_two_namespaces_each_keep_their_bindings() {
    let a = TestNamespace::create("concurrent-a").await;
    let b = TestNamespace::create("concurrent-b").await;
    let installs: Vec<_> = [&a, &b]
        .iter()
        .map(|ns| support::tether_command(ns, &["install", "--namespace", &ns.name]))
        .map(|mut command| std::thread::spawn(move || command.output().expect("tether runs")))
        .collect();
    for install in installs {
        let output = install.join().unwrap();
        assert!(output.status.success(), "{}", text(&output));
    }
    let bindings: Api<ClusterRoleBinding> = Api::all(a.client.clone());
    for ns in [&a, &b] {
        for role in ["tether-controller", "tether-applier"] {
            let binding = bindings.get(&format!("{role}-{}", ns.name)).await.unwrap();
            assert_eq!(binding.role_ref.name, role);
            let subjects = binding.subjects.unwrap_or_default();
            let subjects: Vec<_> = subjects
                .iter()
                .map(|s| (s.name.as_str(), s.namespace.as_deref().unwrap_or("")))
                .collect();
            assert_eq!(subjects, [("tether-controller", ns.name.as_str())]);
        }
    }
}

#[tokio::test]
async fn the_dry_run_manifests_apply_cleanly_with_a_server_side_dry_run() {
    let ns = TestNamespace::create("dry-run").await;
    let dry_run = |format: &str| {
        let args = [
            "install",
            "--namespace",
            &ns.name,
            "--dry-run",
            "-o",
            format,
            "--image",
            "example.com/tether:dev",
            "--replicas",
            "3",
        ];
        tether_ok(&ns, &args)
    };
    let yaml = dry_run("yaml");
    let applied = ns.kubectl_ok_with_stdin(&["apply", "--dry-run=server", "-f", "-"], &yaml);
    assert!(
        applied.contains("deployment.apps/tether-controller"),
        "{applied}"
    );
    assert!(
        applied.contains("clusterrole.rbac.authorization.k8s.io/tether-applier"),
        "{applied}"
    );
    // Nothing was applied.
    assert!(!has_controller_account(&ns).await);

    let json = dry_run("json");
    let list: Value = serde_json::from_str(&json).unwrap();
    let deployment = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["kind"] == "Deployment")
        .unwrap();
    assert_eq!(deployment["spec"]["replicas"], 3);
    ns.kubectl_ok_with_stdin(&["apply", "--dry-run=server", "-f", "-"], &json);

    let crds = tether_ok(&ns, &["install", "--crds-only", "--dry-run", "-o", "json"]);
    let crds: Value = serde_json::from_str(&crds).unwrap();
    let crds: Vec<_> = crds["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["kind"].as_str().unwrap(),
                i["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    let crd = "CustomResourceDefinition";
    assert_eq!(
        crds,
        [
            (crd, "applications.tether.dev"),
            (crd, "breakglasses.tether.dev"),
            (crd, "projects.tether.dev"),
            (crd, "applicationsets.tether.dev")
        ]
    );
}

#[tokio::test]
async fn uninstall_removes_the_controller_and_leaves_the_applied_objects_in_place() {
    // Another install stays, so the shared roles do too (other tests use them).
    let keeper = installed("uninstall-keeper").await;
    let ns = installed("uninstall").await;
    let repo = settings_repo();
    create_app(&ns, &repo, json!({}));
    let controller = run_controller(&ns, "uninstall");
    let apps: Api<Application> = ns.api();
    status_of(&apps, "shop", "Synced", |s| s.sync.status == "Synced").await;
    drop(controller);

    let output = tether(&ns, &["uninstall", "--namespace", &ns.name]);
    assert!(output.status.success(), "{}", text(&output));
    let said = text(&output);
    assert!(said.contains("ServiceAccount"), "{said}");
    assert!(
        said.contains(&format!("ClusterRoleBinding tether-controller-{}", ns.name)),
        "{said}"
    );

    assert!(!has_controller_account(&ns).await);
    let bindings: Api<ClusterRoleBinding> = Api::all(ns.client.clone());
    let name = format!("tether-controller-{}", ns.name);
    assert!(bindings.get_opt(&name).await.unwrap().is_none());
    let kept = format!("tether-controller-{}", keeper.name);
    assert!(bindings.get_opt(&kept).await.unwrap().is_some());
    // The app and what it applied stay; nothing owns the object.
    let settings: ConfigMap = ns.get("settings").await;
    assert!(
        settings
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty()
    );
    assert!(apps.get_opt("shop").await.unwrap().is_some());
    // Running it again is fine.
    tether_ok(&ns, &["uninstall", "--namespace", &ns.name]);
}
