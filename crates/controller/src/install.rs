//! What `tether install` puts in a cluster: the CRDs, and the identity and
//! RBAC the controller runs as.

use std::time::Duration;

use kube::CustomResourceExt;
use serde_json::{Value, json};
use tether_cluster::{Applier, ClusterError, Resources};
use tether_core::{Action, ObjectRef};

use crate::api::Application;

/// The controller's service account name.
pub const SERVICE_ACCOUNT: &str = "tether-controller";

/// The objects `tether install` applies, in apply order.
pub fn manifests(namespace: &str) -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        serde_json::to_value(Application::crd()).expect("CRD serializes"),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": SERVICE_ACCOUNT},
        // Tether applies whatever Git declares, so it may manage any kind.
        "rules": [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["get"]}
        ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": SERVICE_ACCOUNT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SERVICE_ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}]}),
    ]
}

/// Applies [`manifests`] and waits until the Application CRD is established.
pub async fn install(
    client: kube::Client,
    namespace: &str,
) -> Result<Vec<(ObjectRef, Action)>, ClusterError> {
    let applier = Applier::new(Resources::new(client.clone()), namespace);
    let mut results = Vec::new();
    for manifest in manifests(namespace) {
        let applied = applier.apply(&manifest, false).await?;
        if applied.object.kind == "CustomResourceDefinition" {
            tether_cluster::wait::crd_established(
                client.clone(),
                &applied.object.name,
                Duration::from_secs(60),
            )
            .await?;
        }
        results.push((applied.object, applied.action));
    }
    Ok(results)
}
