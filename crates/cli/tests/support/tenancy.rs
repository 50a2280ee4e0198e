//! Many teams on one cluster: ServiceAccounts with namespaced rights,
//! Projects, and what a refused commit looks like.

use kube::api::Api;
use serde_json::{Value, json};
use tether_controller::api::Application;
use tether_controller::api::application::RECONCILED_CONDITION;
use tether_testkit::{TestNamespace, condition, status_of};

use super::bind_cluster_role;

/// ServiceAccount `name` in `ns`, bound in `ns` only to ClusterRole `role`.
pub fn service_account(ns: &TestNamespace, name: &str, role: &str) {
    ns.kubectl_ok(&["create", "serviceaccount", name]);
    bind_cluster_role(
        ns,
        "rolebinding",
        &format!("{name}-{role}"),
        role,
        &format!("{}:{name}", ns.name),
    );
}

/// A ConfigMap `name` in `namespace` greeting "hello".
pub fn config_map_in(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n  greeting: \"hello\"\n"
    )
}

/// A ClusterRoleBinding `name` giving cluster-admin to `namespace`'s `deployer`.
pub fn cluster_role_binding(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {name}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n  - kind: ServiceAccount\n    name: deployer\n    namespace: {namespace}\n"
    )
}

/// The `Reconciled` condition once its reason is `reason`, with the
/// revision the app stays synced to.
pub async fn refused(apps: &Api<Application>, reason: &str) -> (String, Option<String>) {
    let status = status_of(apps, "shop", reason, |s| {
        condition(s, RECONCILED_CONDITION)
            .is_some_and(|c| c.status == "False" && c.reason == reason)
    })
    .await;
    let message = condition(&status, RECONCILED_CONDITION)
        .unwrap()
        .message
        .clone();
    (message, status.sync.revision.clone())
}

/// Project `name` (cluster-scoped) with `spec`; deleted when dropped.
pub struct Project(String);

impl Project {
    pub fn apply(ns: &TestNamespace, name: &str, spec: Value) -> Project {
        let project = json!({"apiVersion": "tether.dev/v1alpha1", "kind": "Project",
            "metadata": {"name": name}, "spec": spec});
        ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &project.to_string());
        Project(name.to_string())
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(tether_testkit::control_plane().kubeconfig())
            .args([
                "delete",
                "project",
                &self.0,
                "--ignore-not-found",
                "--wait=false",
            ])
            .output();
    }
}
