//! What `tether install` puts in a cluster: the CRDs, and the identity and
//! RBAC the controller runs as.

use std::time::Duration;

use kube::CustomResourceExt;
use serde_json::{Value, json};
use tether_cluster::{Applier, ClusterError, Resources};
use tether_core::{Action, ObjectRef};

use crate::api::{Application, BreakGlass};

/// The controller's service account name.
pub const SERVICE_ACCOUNT: &str = "tether-controller";

/// The objects `tether install` applies, in apply order.
pub fn manifests(namespace: &str) -> Vec<Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        serde_json::to_value(Application::crd()).expect("CRD serializes"),
        serde_json::to_value(BreakGlass::crd()).expect("CRD serializes"),
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
        // The break-glass group may open, extend and close windows and read
        // what they are about; everyone who can view a namespace sees them.
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": BREAK_GLASS_ROLE},
        "rules": [
            {"apiGroups": ["tether.dev"], "resources": ["breakglasses"],
             "verbs": ["create", "get", "list", "watch", "patch", "update"]},
            {"apiGroups": ["tether.dev"], "resources": ["applications"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}
        ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": BREAK_GLASS_ROLE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": BREAK_GLASS_ROLE},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                          "name": crate::single_writer::BREAK_GLASS_GROUP}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "tether-view",
                "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"apiGroups": ["tether.dev"], "resources": ["applications", "breakglasses"],
                       "verbs": ["get", "list", "watch"]}]}),
        break_glass_policy(),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": BREAK_GLASS_POLICY},
            "spec": {"policyName": BREAK_GLASS_POLICY, "validationActions": ["Deny"]}}),
    ]
}

/// The ClusterRole (bound to the break-glass group) to manage windows.
pub const BREAK_GLASS_ROLE: &str = "tether-break-glass";

/// The admission policy that makes a BreakGlass window's authors the API
/// server's word, not free text.
pub const BREAK_GLASS_POLICY: &str = "tether-break-glass";

/// A ValidatingAdmissionPolicy (CEL, evaluated by the API server): a
/// window's `openedBy` is the user creating it; what it was opened for
/// (application, scope, reason, opener, original expiry) never changes;
/// extensions are only appended, each by the user making the request; a
/// closing is written once, by the user closing.
fn break_glass_policy() -> Value {
    let rule = |expression: &str, message: &str| {
        json!({"expression": expression,
        "messageExpression": format!("'BreakGlass ' + object.metadata.name + ': ' + {message}")})
    };
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": BREAK_GLASS_POLICY},
    "spec": {"failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": ["tether.dev"], "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"], "resources": ["breakglasses"]}]},
        "matchConditions": [{"name": "spec-only", "expression": "!has(request.subResource) || request.subResource == ''"}],
        "variables": [
            {"name": "extensions", "expression":
                "has(object.spec.extensions) ? object.spec.extensions : []"},
            {"name": "oldExtensions", "expression":
                "request.operation == 'UPDATE' && has(oldObject.spec.extensions) ? oldObject.spec.extensions : []"},
            {"name": "scope", "expression": "has(object.spec.resources) ? object.spec.resources : []"},
            {"name": "oldScope", "expression":
                "request.operation == 'UPDATE' && has(oldObject.spec.resources) ? oldObject.spec.resources : []"},
        ],
        "validations": [
            rule("request.operation != 'CREATE' || object.spec.openedBy.username == request.userInfo.username",
                "'spec.openedBy.username must be the requesting user (' + request.userInfo.username + '); open windows with tether break-glass open'"),
            rule("request.operation != 'UPDATE' || (object.spec.application == oldObject.spec.application && object.spec.reason == oldObject.spec.reason && object.spec.openedBy == oldObject.spec.openedBy && object.spec.expiresAt == oldObject.spec.expiresAt && variables.scope == variables.oldScope)",
                "'application, resources, reason, openedBy and expiresAt cannot change; extend with tether break-glass extend'"),
            rule("request.operation != 'UPDATE' || (variables.oldExtensions.all(e, e in variables.extensions) && variables.extensions.all(e, e in variables.oldExtensions || e.by == request.userInfo.username))",
                "'extensions are only appended, each by the requesting user (' + request.userInfo.username + ')'"),
            rule("request.operation != 'UPDATE' || !has(object.spec.close) || (has(oldObject.spec.close) ? object.spec.close == oldObject.spec.close : object.spec.close.by == request.userInfo.username)",
                "'spec.close is written once, by the requesting user (' + request.userInfo.username + ')'"),
        ]}})
}

/// A Deployment running `tether run` in the cluster as the controller's
/// service account, two replicas (one leads; the other waits on the Lease),
/// webhooks served on port 8080 when a secret named `tether-webhook` exists.
pub fn deployment(namespace: &str, image: &str) -> Value {
    let labels = json!({"app.kubernetes.io/name": "tether-controller"});
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace, "labels": labels},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                "spec": {"serviceAccountName": SERVICE_ACCOUNT,
                    "containers": [{"name": "tether", "image": image,
                        "args": ["run", "--lease-namespace", namespace,
                                 "--http-addr", "0.0.0.0:8080",
                                 "--webhook-secret-file", "/etc/tether/webhook/secret"],
                        "ports": [{"name": "http", "containerPort": 8080}],
                        // Only the leader lists Applications, so only it is
                        // ready (and receives webhooks); a standby is live.
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}},
                        "volumeMounts": [{"name": "webhook", "mountPath": "/etc/tether/webhook", "readOnly": true}],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                      "limits": {"memory": "512Mi"}}}],
                    "volumes": [{"name": "webhook",
                        "secret": {"secretName": "tether-webhook", "optional": true}}]}}}})
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_in_cluster_deployment_runs_the_controller_as_its_service_account() {
        let deployment = deployment("tether-system", "example.com/tether:0.1");
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], SERVICE_ACCOUNT);
        assert_eq!(pod["containers"][0]["image"], "example.com/tether:0.1");
        assert_eq!(pod["containers"][0]["args"][0], "run");
        assert_eq!(deployment["metadata"]["namespace"], "tether-system");
    }
}
