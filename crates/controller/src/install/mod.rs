//! What `tether install` puts in a cluster: the CRDs, the identity and
//! RBAC the controller runs as, and the admission policies that keep
//! break-glass windows and their audit records honest.

use std::time::Duration;

use kube::CustomResourceExt;
use serde_json::{Value, json};
use tether_cluster::{Applier, ClusterError, Resources};
use tether_core::{Action, ObjectRef};

use crate::api::{Application, ApplicationSet, BreakGlass, Project};
use crate::break_glass::audit::WINDOW_UID_LABEL;

pub mod pin_policy;
pub mod project_policy;
pub mod rbac;
pub mod uninstall;

/// The group whose members may change managed objects during an incident.
pub const BREAK_GLASS_GROUP: &str = "tether:break-glass";
/// The controller's service account name.
pub const SERVICE_ACCOUNT: &str = "tether-controller";

/// Label on the controller's namespace: the only namespaces where audit
/// records may be created. Only cluster administrators label namespaces.
pub const CONTROLLER_NAMESPACE_LABEL: &str = "tether.dev/controller-namespace";

/// What one `tether install` puts in the cluster.
#[derive(Debug, Clone)]
pub struct Install {
    /// The controller's namespace (its service account, Lease, audit records).
    pub namespace: String,
    /// The longest break-glass grant the admission policy lets through.
    pub max_window_ttl: Duration,
    /// Namespaces whose repository-credential Secrets the controller may read
    /// (its own always).
    pub secrets_namespaces: Vec<String>,
    /// Namespaces whose Applications may apply as their own ServiceAccount
    /// (the controller may impersonate the ServiceAccounts there).
    pub tenant_namespaces: Vec<String>,
    /// The in-cluster controller's `--default-service-account`.
    pub default_service_account: Option<String>,
    /// The in-cluster controller's `--require-service-account`: nothing is
    /// ever applied with its own rights.
    pub require_service_account: bool,
    /// Run the controller in the cluster: a Deployment of this image.
    pub image: Option<String>,
    /// The Deployment's replicas (one leads, the others wait on the Lease).
    pub replicas: u32,
    /// Only the CRDs.
    pub crds_only: bool,
}

impl Install {
    /// The defaults of `tether install --namespace namespace`.
    pub fn new(namespace: impl Into<String>) -> Install {
        Install {
            namespace: namespace.into(),
            max_window_ttl: tether_core::window::DEFAULT_MAX_TTL,
            secrets_namespaces: Vec::new(),
            tenant_namespaces: Vec::new(),
            default_service_account: None,
            require_service_account: false,
            image: None,
            replicas: 2,
            crds_only: false,
        }
    }

    /// The objects to apply, in apply order.
    pub fn manifests(&self) -> Vec<Value> {
        if self.crds_only {
            return crds();
        }
        let mut manifests = manifests_with_cap(&self.namespace, self.max_window_ttl);
        manifests.extend(rbac::secrets_roles(
            &self.namespace,
            &self.secrets_namespaces,
        ));
        manifests.extend(rbac::tenant_roles(&self.namespace, &self.tenant_namespaces));
        if let Some(image) = &self.image {
            manifests.extend(in_cluster(self, image));
        }
        manifests
    }
}

/// The CustomResourceDefinitions: Application, BreakGlass, Project and
/// ApplicationSet.
pub fn crds() -> Vec<Value> {
    vec![
        serde_json::to_value(Application::crd()).expect("CRD serializes"),
        serde_json::to_value(BreakGlass::crd()).expect("CRD serializes"),
        serde_json::to_value(Project::crd()).expect("CRD serializes"),
        serde_json::to_value(ApplicationSet::crd()).expect("CRD serializes"),
    ]
}

/// The objects `tether install` applies, in apply order, with the default
/// cap on break-glass windows.
pub fn manifests(namespace: &str) -> Vec<Value> {
    manifests_with_cap(namespace, tether_core::window::DEFAULT_MAX_TTL)
}

/// [`manifests`], with the admission policy refusing any break-glass grant
/// longer than `cap` (the controller's `--max-break-glass-ttl`).
pub fn manifests_with_cap(namespace: &str, cap: Duration) -> Vec<Value> {
    let mut manifests = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace,
            "labels": {CONTROLLER_NAMESPACE_LABEL: "true"}}}),
    ];
    manifests.extend(crds());
    manifests.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace,
            "labels": {rbac::INSTALL_NAMESPACE_LABEL: namespace}}}));
    manifests.extend(rbac::manifests(namespace));
    manifests.extend(project_policy::manifests());
    manifests.extend(pin_policy::manifests());
    manifests.extend(vec![
        // The break-glass group may open, extend and close windows and read
        // what they are about; everyone who can view a namespace sees them.
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": BREAK_GLASS_ROLE},
        "rules": [
            {"apiGroups": ["tether.dev"], "resources": ["breakglasses"],
             "verbs": ["create", "get", "list", "watch", "patch", "update"]},
            {"apiGroups": ["tether.dev"], "resources": ["applications"], "verbs": ["get", "list", "watch"]}
        ]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": BREAK_GLASS_ROLE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": BREAK_GLASS_ROLE},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                          "name": BREAK_GLASS_GROUP}]}),
        // …and read the audit records (`tether break-glass show` checks their
        // sequence), which live in the controller's namespace only.
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": AUDIT_READER_ROLE, "namespace": namespace},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": AUDIT_READER_ROLE, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": AUDIT_READER_ROLE},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                          "name": BREAK_GLASS_GROUP}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "tether-view",
                "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"apiGroups": ["tether.dev"], "resources": ["applications", "breakglasses"],
                       "verbs": ["get", "list", "watch"]}]}),
        rbac::tenant_role(),
        audit_records_policy(),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": AUDIT_RECORDS_POLICY},
            "spec": {"policyName": AUDIT_RECORDS_POLICY, "validationActions": ["Deny"]}}),
        // Last: once the API server enforces it, it enforces every policy
        // above (see policies_in_force).
        break_glass_policy(cap),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": BREAK_GLASS_POLICY},
            "spec": {"policyName": BREAK_GLASS_POLICY, "validationActions": ["Deny"]}}),
    ]);
    manifests
}

/// The Role (in the controller's namespace) to read audit records.
pub const AUDIT_READER_ROLE: &str = "tether-audit-reader";

/// The admission policy that keeps audit records where tenants cannot
/// write, and unchanged.
pub const AUDIT_RECORDS_POLICY: &str = "tether-audit-records";

/// A ValidatingAdmissionPolicy on ConfigMaps labelled as audit records
/// (with a window's uid): created only in a namespace labelled as a
/// controller's ([`CONTROLLER_NAMESPACE_LABEL`]) by the controller's
/// service account there or a cluster administrator (`system:masters`,
/// who can remove the policy anyway); never updated (an immutable
/// ConfigMap still lets labels and annotations change); deleted only with
/// their namespace or by a cluster administrator. The keyed seals make
/// whatever an administrator does visible.
fn audit_records_policy() -> Value {
    let admin = "(has(request.userInfo.groups) && 'system:masters' in request.userInfo.groups)";
    let rule = |expression: String, message: &str| {
        json!({"expression": expression, "reason": "Forbidden",
        "messageExpression": format!("'ConfigMap ' + request.namespace + '/' + request.name + ': ' + {message}")})
    };
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": AUDIT_RECORDS_POLICY},
    "spec": {"failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [{"apiGroups": [""], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["configmaps"]}],
            "objectSelector": {"matchExpressions": [{"key": WINDOW_UID_LABEL, "operator": "Exists"}]}
        },
        "validations": [
            rule(format!("request.operation != 'CREATE' || (has(namespaceObject.metadata.labels) && '{CONTROLLER_NAMESPACE_LABEL}' in namespaceObject.metadata.labels)"),
                "'break-glass audit records (label tether.dev/break-glass-uid) are written by the Tether controller, in its own namespace only'"),
            rule(format!("request.operation != 'CREATE' || request.userInfo.username == 'system:serviceaccount:' + request.namespace + ':{SERVICE_ACCOUNT}' || {admin}"),
                "'break-glass audit records are written by the Tether controller only (' + request.userInfo.username + ' is not it)'"),
            rule("request.operation != 'UPDATE'".to_string(),
                "'break-glass audit records are never changed'"),
            rule(format!("request.operation != 'DELETE' || has(namespaceObject.metadata.deletionTimestamp) || {admin}"),
                "'break-glass audit records are deleted only with their namespace'"),
        ]}})
}

/// The ClusterRole (bound to the break-glass group) to manage windows.
pub const BREAK_GLASS_ROLE: &str = "tether-break-glass";

/// The admission policy that makes a BreakGlass window's authors the API
/// server's word, not free text.
pub const BREAK_GLASS_POLICY: &str = "tether-break-glass";

/// An RFC 3339 time as the API server's CEL `timestamp()` reads it; other
/// text is left to the controller, which marks the window Invalid.
const RFC3339: &str =
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$";

/// A ValidatingAdmissionPolicy (CEL, evaluated by the API server): a
/// window's `openedBy` is the user creating it, with none but their own
/// groups and no `system:` group; what it was opened for (application,
/// scope, reason, opener, original expiry) never changes; no grant lasts
/// longer than `cap` (the opening from the window's creation, an extension
/// from its `at`, which is no later than the expiry it extends);
/// extensions are only appended, each by the user making the request; a
/// closing is written once, by the user closing.
fn break_glass_policy(cap: Duration) -> Value {
    let cap_text = tether_core::window::format_ttl(cap);
    // Added to a time, never compared as a difference: a CEL duration
    // overflows past ~290 years (an expiry in 2999 would be an error).
    let cap = format!("duration('{}s')", cap.as_secs());
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
            {"name": "groups", "expression":
                "has(object.spec.openedBy.groups) ? object.spec.openedBy.groups : []"},
            {"name": "oldExpiry", "expression":
                "request.operation != 'UPDATE' ? '' : size(variables.oldExtensions) > 0 ? variables.oldExtensions[size(variables.oldExtensions) - 1].expiresAt : oldObject.spec.expiresAt"},
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
            rule("request.operation != 'CREATE' || variables.groups.all(g, !g.startsWith('system:') && has(request.userInfo.groups) && g in request.userInfo.groups)",
                "'spec.openedBy.groups may name only groups of the requesting user, and no system: group'"),
            rule(&format!("request.operation != 'CREATE' || !has(object.metadata.creationTimestamp) || !object.spec.expiresAt.matches('{RFC3339}') || timestamp(object.spec.expiresAt) <= timestamp(object.metadata.creationTimestamp) + {cap}"),
                &format!("'spec.expiresAt is more than {cap_text} after the opening (the longest a window is granted at once); extend it when it is about to expire'")),
            rule(&format!("request.operation != 'UPDATE' || variables.extensions.all(e, e in variables.oldExtensions || (timestamp(e.at) <= timestamp(variables.oldExpiry) && timestamp(e.expiresAt) <= timestamp(e.at) + {cap}))"),
                &format!("'an extension lasts at most {cap_text} from its time (at), which is no later than the expiry it extends'")),
        ]}})
}

/// The controller's HTTP port (probes, webhooks), in the pod and on the
/// Service.
pub const HTTP_PORT: u16 = 8080;
/// Where the controller keeps Git object stores in its pod (an emptyDir).
pub const CACHE_DIR: &str = "/var/cache/tether";
/// The non-root user and group the image runs as.
pub const RUN_AS: u32 = 65532;

/// The controller's pods: label `app.kubernetes.io/name`.
fn selector() -> Value {
    json!({"app.kubernetes.io/name": SERVICE_ACCOUNT})
}

/// What `tether install --image` adds: the controller's Deployment, the
/// Service to its leader and a PodDisruptionBudget.
pub fn in_cluster(install: &Install, image: &str) -> Vec<Value> {
    let namespace = install.namespace.as_str();
    let labels = json!({"app.kubernetes.io/name": SERVICE_ACCOUNT,
        rbac::INSTALL_NAMESPACE_LABEL: namespace});
    let mut leader = selector();
    leader[crate::lease::LEADER_LABEL] = json!("true");
    vec![
        deployment(install, image),
        // Webhooks reach the leader, the one replica that acts on them
        // (it labels its pod while it leads).
        json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace, "labels": labels},
            "spec": {"selector": leader,
                "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"}]}}),
        // A drain evicts one replica at a time; the other takes over.
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace, "labels": labels},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector()}}}),
    ]
}

/// A Deployment running `tether run` in the cluster as the controller's
/// service account, `replicas` of them (one leads; the others wait on the
/// Lease and take over within seconds when it stops), webhooks served on
/// [`HTTP_PORT`] when a secret named `tether-webhook` exists. The pods run
/// as a non-root user with a read-only root filesystem, no privilege
/// escalation, no capabilities and the runtime's default seccomp profile;
/// the Git cache and `/tmp` are emptyDirs.
pub fn deployment(install: &Install, image: &str) -> Value {
    let namespace = install.namespace.as_str();
    let http = format!("0.0.0.0:{HTTP_PORT}");
    // The controller's cap on break-glass grants is the admission policy's.
    let cap = format!("{}s", install.max_window_ttl.as_secs());
    let mut args = vec![
        "run",
        "--lease-namespace",
        namespace,
        "--http-addr",
        &http,
        "--cache-dir",
        CACHE_DIR,
        "--webhook-secret-file",
        "/etc/tether/webhook/secret",
        // The pod is the renderers' sandbox: bubblewrap needs user
        // namespaces, which a restricted pod does not get.
        "--render-sandbox",
        "off",
        "--max-break-glass-ttl",
        &cap,
    ];
    // Repository credentials only where its Roles let it read Secrets.
    let others = install
        .secrets_namespaces
        .iter()
        .filter(|ns| *ns != namespace);
    for secrets in std::iter::once(namespace).chain(others.map(String::as_str)) {
        args.extend(["--secrets-namespace", secrets]);
    }
    // Whom Applications apply as.
    if let Some(account) = &install.default_service_account {
        args.extend(["--default-service-account", account]);
    }
    if install.require_service_account {
        args.push("--require-service-account");
    }
    let field = |path: &str| json!({"fieldRef": {"fieldPath": path}});
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace,
            "labels": {"app.kubernetes.io/name": SERVICE_ACCOUNT,
                rbac::INSTALL_NAMESPACE_LABEL: namespace}},
        "spec": {"replicas": install.replicas, "selector": {"matchLabels": selector()},
            // A new replica starts (and waits on the Lease) before an old
            // one stops, so a rollout hands over once per old replica.
            "strategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {"metadata": {"labels": selector()},
                "spec": {"serviceAccountName": SERVICE_ACCOUNT,
                    // Longer than the controller needs to give its Lease back.
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": {"runAsNonRoot": true, "runAsUser": RUN_AS,
                        "runAsGroup": RUN_AS, "fsGroup": RUN_AS,
                        "seccompProfile": {"type": "RuntimeDefault"}},
                    // Replicas on different nodes, where there are several.
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": selector()}}}]}},
                    "containers": [{"name": "tether", "image": image,
                        "args": args,
                        "env": [{"name": "POD_NAME", "valueFrom": field("metadata.name")},
                                {"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")},
                                // Git and Helm write under HOME; the root fs is read-only.
                                {"name": "HOME", "value": "/tmp"}],
                        "ports": [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}],
                        // Live while it can watch its Applications; ready as
                        // a standby that reads the Lease, or as the leader
                        // once it has listed every Application.
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"},
                            "periodSeconds": 10, "failureThreshold": 3},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"},
                            "periodSeconds": 2, "failureThreshold": 3},
                        "securityContext": {"allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true, "runAsNonRoot": true,
                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [
                            {"name": "webhook", "mountPath": "/etc/tether/webhook", "readOnly": true},
                            {"name": "cache", "mountPath": CACHE_DIR},
                            {"name": "tmp", "mountPath": "/tmp"}],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                      "limits": {"memory": "1Gi"}}}],
                    "volumes": [
                        {"name": "webhook", "secret": {"secretName": "tether-webhook", "optional": true}},
                        {"name": "cache", "emptyDir": {}},
                        {"name": "tmp", "emptyDir": {}}]}}}})
}

/// Applies [`manifests`] and waits until the Application CRD is established.
pub async fn install(
    client: kube::Client,
    namespace: &str,
) -> Result<Vec<(ObjectRef, Action)>, ClusterError> {
    install_with_cap(client, namespace, tether_core::window::DEFAULT_MAX_TTL).await
}

/// [`install`], with break-glass grants capped at `cap` ([`manifests_with_cap`]).
pub async fn install_with_cap(
    client: kube::Client,
    namespace: &str,
    cap: Duration,
) -> Result<Vec<(ObjectRef, Action)>, ClusterError> {
    let mut install = Install::new(namespace);
    install.max_window_ttl = cap;
    apply(client, &install).await
}

/// How long an install waits for a CRD to be served or the admission
/// policies to be enforced.
const INSTALL_WAIT: Duration = Duration::from_secs(60);

/// Applies `install`'s manifests with server-side apply (forcing Tether's
/// fields), waiting until each CRD is established and the admission
/// policies are enforced. Safe to run again, and next to an install into
/// another namespace.
pub async fn apply(
    client: kube::Client,
    install: &Install,
) -> Result<Vec<(ObjectRef, Action)>, ClusterError> {
    let applier = Applier::new(Resources::new(client.clone()), &install.namespace);
    let mut results = Vec::new();
    for manifest in install.manifests() {
        let applied = applier.apply(&manifest, false).await?;
        if applied.object.kind == "CustomResourceDefinition" {
            tether_cluster::wait::crd_established(
                client.clone(),
                &applied.object.name,
                INSTALL_WAIT,
            )
            .await?;
        }
        results.push((applied.object, applied.action));
    }
    if !install.crds_only {
        policies_in_force(client, &install.namespace, INSTALL_WAIT).await?;
    }
    Ok(results)
}

/// Waits until the API server enforces the admission policies just
/// applied: a dry-run BreakGlass in `namespace` claiming `system:masters`
/// is refused by the break-glass policy.
///
/// The API server loads a new policy a moment after it is written (its
/// informers see it, then a periodic recompile picks it up); until then a
/// window past every limit would be let through. The break-glass policy is
/// applied last, after the same informers saw every other policy, so once
/// it bites they all do.
async fn policies_in_force(
    client: kube::Client,
    namespace: &str,
    timeout: Duration,
) -> Result<(), ClusterError> {
    let probe: BreakGlass = serde_json::from_value(json!({
        "apiVersion": "tether.dev/v1alpha1", "kind": "BreakGlass",
        "metadata": {"name": "tether-install-probe", "namespace": namespace},
        "spec": {"application": "tether-install-probe",
                 "reason": "tether install: are the admission policies in force?",
                 "openedBy": {"username": "tether-install-probe", "groups": ["system:masters"]},
                 "expiresAt": "2000-01-01T00:00:00Z"}}))
    .expect("the probe is a BreakGlass");
    let object = ObjectRef {
        group: "tether.dev".into(),
        kind: "BreakGlass".into(),
        namespace: Some(namespace.into()),
        name: "tether-install-probe".into(),
    };
    let api: kube::Api<BreakGlass> = kube::Api::namespaced(client, namespace);
    let params = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    let denied_by = format!("ValidatingAdmissionPolicy '{BREAK_GLASS_POLICY}'");
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match api.create(&params, &probe).await {
            Err(kube::Error::Api(status)) if status.message.contains(&denied_by) => return Ok(()),
            Err(error) if !matches!(&error, kube::Error::Api(status) if status.code == 409) => {
                return Err(ClusterError::Request {
                    object,
                    step: "a dry-run create to check the admission policies",
                    error,
                });
            }
            // Let through (or an old probe in the way): not loaded yet.
            _ => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(ClusterError::Timeout {
                object,
                message: format!(
                    "the API server does not enforce ValidatingAdmissionPolicy {BREAK_GLASS_POLICY} after {}s (is the ValidatingAdmissionPolicy admission plugin enabled?)",
                    timeout.as_secs()
                ),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_in_cluster_deployment_runs_the_controller_as_its_service_account() {
        let mut install = Install::new("tether-system");
        install.replicas = 3;
        install.secrets_namespaces = vec!["shop".into()];
        let deployment = deployment(&install, "example.com/tether:0.1");
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], SERVICE_ACCOUNT);
        assert_eq!(pod["containers"][0]["image"], "example.com/tether:0.1");
        assert_eq!(pod["containers"][0]["args"][0], "run");
        assert_eq!(deployment["metadata"]["namespace"], "tether-system");
        assert_eq!(deployment["spec"]["replicas"], 3);
        let args = pod["containers"][0]["args"].to_string();
        assert!(
            args.contains(r#""--secrets-namespace","tether-system","--secrets-namespace","shop""#),
            "{args}"
        );
    }

    #[test]
    fn the_controller_pods_are_restricted_and_the_service_reaches_only_the_leader() {
        let objects = in_cluster(&Install::new("tether-system"), "tether:dev");
        let kinds: Vec<_> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["Deployment", "Service", "PodDisruptionBudget"]);
        let pod = &objects[0]["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        let security = &container["securityContext"];
        assert_eq!(security["allowPrivilegeEscalation"], false);
        assert_eq!(security["readOnlyRootFilesystem"], true);
        assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
        let mounts = container["volumeMounts"].to_string();
        assert!(
            mounts.contains(CACHE_DIR) && mounts.contains("/tmp"),
            "{mounts}"
        );
        assert_eq!(
            objects[1]["spec"]["selector"][crate::lease::LEADER_LABEL],
            "true"
        );
        assert_eq!(objects[2]["spec"]["maxUnavailable"], 1);
        let template_labels = &objects[0]["spec"]["template"]["metadata"]["labels"];
        assert_eq!(
            &objects[2]["spec"]["selector"]["matchLabels"],
            template_labels
        );
    }

    fn named<'a>(manifests: &'a [Value], kind: &str, name: &str) -> &'a Value {
        manifests
            .iter()
            .find(|m| m["kind"] == kind && m["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name}"))
    }

    #[test]
    fn the_controller_reads_only_discovery_outside_resources_and_break_glass_no_configmaps() {
        let manifests = manifests("tether-system");
        let controller = named(&manifests, "ClusterRole", SERVICE_ACCOUNT);
        let rules = controller["rules"].as_array().unwrap();
        let urls = &rules.last().unwrap()["nonResourceURLs"];
        assert!(!urls.as_array().unwrap().contains(&json!("*")), "{urls}");
        let break_glass = named(&manifests, "ClusterRole", BREAK_GLASS_ROLE);
        assert!(
            !break_glass.to_string().contains("configmaps"),
            "{break_glass}"
        );
        let reader = named(&manifests, "Role", AUDIT_READER_ROLE);
        assert_eq!(reader["metadata"]["namespace"], "tether-system");
        let namespace = named(&manifests, "Namespace", "tether-system");
        assert_eq!(
            namespace["metadata"]["labels"][CONTROLLER_NAMESPACE_LABEL],
            "true"
        );
    }

    #[test]
    fn no_enum_in_the_crds_lists_null_which_kubectl_validation_refuses() {
        fn nulls(value: &Value, path: &str, found: &mut Vec<String>) {
            match value {
                Value::Object(map) => {
                    for (key, value) in map {
                        if key == "enum"
                            && value.as_array().is_some_and(|e| e.contains(&Value::Null))
                        {
                            found.push(path.to_string());
                        }
                        nulls(value, &format!("{path}.{key}"), found);
                    }
                }
                Value::Array(items) => items.iter().for_each(|v| nulls(v, path, found)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        for crd in crds() {
            nulls(&crd, "", &mut found);
        }
        assert!(found.is_empty(), "{found:#?}");
        let spec =
            &crds()[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let policy = &spec["properties"]["syncPolicy"];
        assert!(
            !policy["required"].to_string().contains("prunePropagation"),
            "{policy}"
        );
    }

    #[test]
    fn the_break_glass_policy_carries_the_cap() {
        let manifests = manifests_with_cap("tether-system", Duration::from_secs(2 * 3600));
        let policy = named(&manifests, "ValidatingAdmissionPolicy", BREAK_GLASS_POLICY).to_string();
        assert!(policy.contains("duration('7200s')"), "{policy}");
        assert!(
            policy.contains("more than 2h after the opening"),
            "{policy}"
        );
    }
}
