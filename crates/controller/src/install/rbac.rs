//! What the controller's service account may do: observe, write its own
//! objects, and apply only the kinds a cluster administrator grants.
//!
//! - `tether-controller` (ClusterRole): get/list/watch on every built-in
//!   group and on the core kinds except Secrets; write on Applications and
//!   BreakGlasses (their status and finalizers too, and Applications
//!   themselves for app-of-apps); create Events; create Namespaces
//!   (`syncPolicy.createNamespace`); discovery.
//! - `tether-applier` (ClusterRole, aggregated): everything in the
//!   ClusterRoles labelled [`AGGREGATE_TO_APPLIER`]`: "true"`, the way
//!   Kubernetes aggregates `admin` and `edit`; `tether-applier-default`
//!   grants the common namespaced workload kinds. Neither Secrets, RBAC
//!   nor CRDs, and never escalate, bind or impersonate.
//! - `tether-metrics-reader` (ClusterRole): `get` on the non-resource
//!   URL `/metrics`, for users to bind to their Prometheus; the controller
//!   checks it with a TokenReview and a SubjectAccessReview, which its own
//!   ClusterRole lets it create.
//! - `tether-controller` (Role, in the controller's namespace): Leases,
//!   the break-glass audit records (ConfigMaps), the audit key (a Secret)
//!   and its pods' leader label.
//! - `tether-controller-<namespace>` (Role, in each `--secrets-namespace`):
//!   read the repository-credential Secrets there.
//! - `tether-impersonator-<namespace>` (Role, in each `--tenant-namespace`):
//!   impersonate the ServiceAccounts of that namespace, so the
//!   Applications there apply as the one they name
//!   (`spec.serviceAccountName`) — and never as anyone of another
//!   namespace, nor as a user or group.
//!
//! And one role for people: `tether-tenant` (ClusterRole, bound by a
//! RoleBinding in a tenant's namespace next to `edit`) manages the
//! Applications there and opens, extends and closes their break-glass
//! windows — all `tether status|diff|drift|break-glass -n NAMESPACE` needs.
//!
//! Bindings are named after the controller's namespace, so two installs
//! into two namespaces never overwrite each other's subject.

use serde_json::{Value, json};

use super::SERVICE_ACCOUNT;

/// The label that adds a ClusterRole's rules to `tether-applier`.
pub const AGGREGATE_TO_APPLIER: &str = "tether.dev/aggregate-to-applier";
/// The aggregated ClusterRole the controller applies users' objects with.
pub const APPLIER_ROLE: &str = "tether-applier";
/// The ClusterRole aggregated into [`APPLIER_ROLE`] by default.
pub const APPLIER_DEFAULT_ROLE: &str = "tether-applier-default";
/// The ClusterRole that lets a caller read the controller's `/metrics`.
pub const METRICS_READER_ROLE: &str = "tether-metrics-reader";
/// The ClusterRole a tenant is bound to in their namespace (see [`tenant_role`]).
pub const TENANT_ROLE: &str = "tether-tenant";
/// The label naming the controller namespace an object was installed for
/// (`tether uninstall` deletes by it).
pub const INSTALL_NAMESPACE_LABEL: &str = "tether.dev/install-namespace";

const RBAC: &str = "rbac.authorization.k8s.io/v1";
const READ: [&str; 3] = ["get", "list", "watch"];
const WRITE: [&str; 7] = [
    "get", "list", "watch", "create", "update", "patch", "delete",
];

/// The core kinds the controller observes: all but Secrets, which it reads
/// only where a Role lets it.
const CORE_OBSERVED: [&str; 14] = [
    "configmaps",
    "endpoints",
    "events",
    "limitranges",
    "namespaces",
    "nodes",
    "persistentvolumeclaims",
    "persistentvolumes",
    "pods",
    "podtemplates",
    "replicationcontrollers",
    "resourcequotas",
    "serviceaccounts",
    "services",
];

/// The built-in API groups the controller observes in full (none holds
/// Secrets). Kinds of other groups (CRDs) are observed once a ClusterRole
/// aggregated into `tether-applier` grants them.
const GROUPS_OBSERVED: [&str; 19] = [
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "tether.dev",
];

/// A binding of the controller's service account in `namespace` to a role.
fn binding(
    namespace: &str,
    kind: &str,
    name: &str,
    role: (&str, &str),
    in_ns: Option<&str>,
) -> Value {
    let mut metadata = json!({"name": name, "labels": {INSTALL_NAMESPACE_LABEL: namespace}});
    if let Some(ns) = in_ns {
        metadata["namespace"] = json!(ns);
    }
    json!({"apiVersion": RBAC, "kind": kind, "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role.0, "name": role.1},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}]})
}

/// The controller's RBAC for an install into `namespace`.
pub fn manifests(namespace: &str) -> Vec<Value> {
    let labels = json!({INSTALL_NAMESPACE_LABEL: namespace});
    let per_namespace = format!("{SERVICE_ACCOUNT}-{namespace}");
    vec![
        controller_role(),
        applier_role(),
        applier_default_role(),
        metrics_reader_role(),
        binding(
            namespace,
            "ClusterRoleBinding",
            &per_namespace,
            ("ClusterRole", SERVICE_ACCOUNT),
            None,
        ),
        binding(
            namespace,
            "ClusterRoleBinding",
            &format!("{APPLIER_ROLE}-{namespace}"),
            ("ClusterRole", APPLIER_ROLE),
            None,
        ),
        json!({"apiVersion": RBAC, "kind": "Role",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace, "labels": labels},
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": WRITE},
            // Audit records are created, never changed; health rules are read.
            {"apiGroups": [""], "resources": ["configmaps"],
             "verbs": ["get", "list", "watch", "create", "delete"]},
            // The audit key, created on first start; and repository
            // credentials of Applications in this namespace.
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch", "create"]},
            // Its own pod's leader label (the Service routes to the leader).
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]},
        ]}),
        binding(
            namespace,
            "RoleBinding",
            SERVICE_ACCOUNT,
            ("Role", SERVICE_ACCOUNT),
            Some(namespace),
        ),
    ]
}

/// A Role and its binding in each of `secrets_namespaces` (but the
/// controller's own, which has them already): read Secrets there, where
/// Applications keep their repository credentials.
pub fn secrets_roles(namespace: &str, secrets_namespaces: &[String]) -> Vec<Value> {
    let per_namespace = format!("{SERVICE_ACCOUNT}-{namespace}");
    let mut manifests = Vec::new();
    for other in secrets_namespaces.iter().filter(|ns| *ns != namespace) {
        manifests.push(json!({"apiVersion": RBAC, "kind": "Role",
            "metadata": {"name": per_namespace, "namespace": other,
                "labels": {INSTALL_NAMESPACE_LABEL: namespace}},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": READ}]}));
        manifests.push(binding(
            namespace,
            "RoleBinding",
            &per_namespace,
            ("Role", &per_namespace),
            Some(other),
        ));
    }
    manifests
}

/// A Role and its binding in each of `tenant_namespaces`: impersonate
/// the ServiceAccounts there (and only there), which is what applying as
/// an Application's `spec.serviceAccountName` takes.
pub fn tenant_roles(namespace: &str, tenant_namespaces: &[String]) -> Vec<Value> {
    let name = format!("tether-impersonator-{namespace}");
    let mut manifests = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for tenant in tenant_namespaces.iter().filter(|ns| seen.insert(*ns)) {
        manifests.push(json!({"apiVersion": RBAC, "kind": "Role",
            "metadata": {"name": name, "namespace": tenant,
                "labels": {INSTALL_NAMESPACE_LABEL: namespace}},
            "rules": [{"apiGroups": [""], "resources": ["serviceaccounts"],
                       "verbs": ["impersonate"]}]}));
        manifests.push(binding(
            namespace,
            "RoleBinding",
            &name,
            ("Role", &name),
            Some(tenant),
        ));
    }
    manifests
}

fn controller_role() -> Value {
    json!({"apiVersion": RBAC, "kind": "ClusterRole",
    "metadata": {"name": SERVICE_ACCOUNT},
    "rules": [
        // Observe.
        {"apiGroups": [""], "resources": CORE_OBSERVED, "verbs": READ},
        {"apiGroups": GROUPS_OBSERVED, "resources": ["*"], "verbs": READ},
        // Its own objects; Applications are applied too (app-of-apps).
        {"apiGroups": ["tether.dev"], "resources": ["applications", "breakglasses"],
         "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        // ApplicationSets: read, their status written (the Applications a
        // set generates are written with the rule above).
        {"apiGroups": ["tether.dev"], "resources": ["applicationsets"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["tether.dev"], "resources": ["applicationsets/status"],
         "verbs": ["get", "update", "patch"]},
        {"apiGroups": ["tether.dev"],
         "resources": ["applications/status", "breakglasses/status",
                       "applications/finalizers", "breakglasses/finalizers"],
         "verbs": ["get", "update", "patch"]},
        // Events on the Applications and windows it reports about.
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"],
         "verbs": ["create", "update", "patch"]},
        // `syncPolicy.createNamespace` (server-side apply creates by patch).
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create", "patch"]},
        // Who may read `/metrics`: the caller's token, then their access.
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
         "verbs": ["create"]},
        // Outside resources only discovery, which `system:discovery` grants
        // every authenticated user anyway.
        {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/version"], "verbs": ["get"]}
    ]})
}

fn metrics_reader_role() -> Value {
    json!({"apiVersion": RBAC, "kind": "ClusterRole",
        "metadata": {"name": METRICS_READER_ROLE},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]})
}

fn applier_role() -> Value {
    json!({"apiVersion": RBAC, "kind": "ClusterRole",
        "metadata": {"name": APPLIER_ROLE},
        "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {AGGREGATE_TO_APPLIER: "true"}}]},
        // Filled in by the API server's aggregation controller.
        "rules": []})
}

fn applier_default_role() -> Value {
    json!({"apiVersion": RBAC, "kind": "ClusterRole",
    "metadata": {"name": APPLIER_DEFAULT_ROLE, "labels": {AGGREGATE_TO_APPLIER: "true"}},
    "rules": [
        {"apiGroups": ["apps"],
         "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"], "verbs": WRITE},
        {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": WRITE},
        {"apiGroups": [""],
         "resources": ["configmaps", "services", "serviceaccounts", "persistentvolumeclaims"],
         "verbs": WRITE},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": WRITE},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": WRITE},
        {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": WRITE},
    ]})
}

/// What a tenant may do with Tether's objects in a namespace a RoleBinding
/// grants it in: manage Applications; open, extend and close break-glass
/// windows (the admission policy makes them in the tenant's own name) but
/// never delete one, as a window is the record of an incident. Bound next to
/// `edit`, which lets `tether diff` read and dry-run the app's objects and
/// read its repository credentials. An Application applies with the
/// controller's rights unless it names a ServiceAccount, so run the
/// controller with `--require-service-account` where tenants create them.
pub fn tenant_role() -> Value {
    json!({"apiVersion": RBAC, "kind": "ClusterRole",
    "metadata": {"name": TENANT_ROLE},
    "rules": [
        {"apiGroups": ["tether.dev"], "resources": ["applications"], "verbs": WRITE},
        {"apiGroups": ["tether.dev"], "resources": ["applicationsets"], "verbs": WRITE},
        {"apiGroups": ["tether.dev"], "resources": ["breakglasses"],
         "verbs": ["get", "list", "watch", "create", "update", "patch"]},
    ]})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules_of(manifests: &[Value]) -> String {
        manifests
            .iter()
            .filter(|m| m["kind"] == "ClusterRole" || m["kind"] == "Role")
            .map(|m| m["rules"].to_string())
            .collect()
    }

    #[test]
    fn no_rule_grants_everything_or_escalation() {
        let mut all = manifests("tether-system");
        all.extend(secrets_roles("tether-system", &["shop".into()]));
        let text = rules_of(&all);
        for word in ["escalate", "\"bind\"", "impersonate"] {
            assert!(!text.contains(word), "{word} in {text}");
        }
        assert!(!text.contains(r#""verbs":["*"]"#), "{text}");
        let controller = controller_role();
        for rule in controller["rules"].as_array().unwrap() {
            let writes = rule["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|verb| !READ.contains(&verb.as_str().unwrap()));
            if rule["resources"] == json!(["*"]) {
                assert!(!writes, "{rule}");
            }
        }
    }

    /// A manifest's kind and namespace (`-` when cluster-scoped).
    fn kind_and_namespace(m: &Value) -> (&str, &str) {
        (
            m["kind"].as_str().unwrap(),
            m["metadata"]["namespace"].as_str().unwrap_or("-"),
        )
    }

    #[test]
    fn impersonation_is_granted_only_on_the_service_accounts_of_tenant_namespaces() {
        let mut all = manifests("tether-system");
        all.extend(tenant_roles(
            "tether-system",
            &["team-a".into(), "team-b".into(), "team-a".into()],
        ));
        let impersonating: Vec<_> = all
            .iter()
            .filter(|m| m["rules"].to_string().contains("impersonate"))
            .map(|m| {
                assert_eq!(
                    m["rules"],
                    json!([{"apiGroups": [""], "resources": ["serviceaccounts"],
                            "verbs": ["impersonate"]}])
                );
                kind_and_namespace(m)
            })
            .collect();
        assert_eq!(impersonating, [("Role", "team-a"), ("Role", "team-b")]);
    }

    #[test]
    fn secrets_are_read_only_in_the_named_namespaces() {
        let mut all = manifests("tether-system");
        all.extend(secrets_roles("tether-system", &["shop".into()]));
        let with_secrets: Vec<_> = all
            .iter()
            .filter(|m| m["rules"].to_string().contains("secrets"))
            .map(kind_and_namespace)
            .collect();
        assert_eq!(with_secrets, [("Role", "tether-system"), ("Role", "shop")]);
    }

    #[test]
    fn a_tenant_manages_tether_objects_only_and_never_deletes_a_window() {
        let role = tenant_role();
        let rules = role["rules"].as_array().unwrap();
        assert!(
            rules
                .iter()
                .all(|r| r["apiGroups"] == json!(["tether.dev"]))
        );
        let verbs = |resource: &str| {
            rules
                .iter()
                .find(|r| r["resources"] == json!([resource]))
                .map(|r| r["verbs"].clone())
                .unwrap()
        };
        assert_eq!(verbs("applications"), json!(WRITE));
        assert!(verbs("breakglasses").to_string().contains("patch"));
        assert!(!verbs("breakglasses").to_string().contains("delete"));
    }

    #[test]
    fn bindings_are_named_after_the_controller_namespace() {
        let names = |ns: &str| -> Vec<String> {
            manifests(ns)
                .iter()
                .filter(|m| m["kind"] == "ClusterRoleBinding")
                .map(|m| m["metadata"]["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(names("a"), ["tether-controller-a", "tether-applier-a"]);
        assert!(names("a").iter().all(|name| !names("b").contains(name)));
    }
}
