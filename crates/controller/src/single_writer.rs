//! "The controller is the only writer", enforced by the API server itself:
//! a `ValidatingAdmissionPolicy` (CEL, no webhook to run) and its binding,
//! installed by `tether install --enforce-single-writer`.
//!
//! The policy sees UPDATE (PATCH arrives as UPDATE) and DELETE of every
//! object carrying Tether's tracking label, and denies them unless the
//! request comes from
//!
//! - a writer: Tether's service account, or a user named with `--writer`
//!   (e.g. `tether run` outside the cluster under its own identity),
//! - Kubernetes itself: `system:serviceaccount:kube-system:*` (controllers
//!   with their own credentials), `system:kube-controller-manager`,
//!   `system:kube-scheduler` and nodes (`system:nodes`) — the garbage
//!   collector, the namespace controller, the deployment controller's
//!   revision annotation, endpoint controllers copying a Service's labels,
//! - a member of the break-glass group (`tether:break-glass` by default).
//!
//! Nor does it deny an operator's request to Tether about an Application
//! another app manages (app of apps): an update that changes only the sync
//! request annotations (`tether sync`) or `spec.pin` (`tether rollback`).
//!
//! Not covered, by the API's own matching: CREATE; subresources such as
//! `status` (controllers report there) and `scale`. The Scale object a
//! `kubectl scale` sends carries no labels, so no label selector can match
//! it; such a change is reverted by self-heal and listed in the
//! Application's `status.otherWriters` instead.
//!
//! The writers and the group are literal values in the CEL (quoted as JSON
//! strings, which CEL reads the same way): the policy needs no parameter
//! object, and re-running `tether install` with other values re-applies it.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};
use tether_cluster::{Applier, ClusterError, Resources};
use tether_core::tracking::{APP_LABEL, TRACKING_ANNOTATION};
use tether_core::{Action, ObjectRef};

use crate::api::application::{
    ALLOW_MASS_PRUNE_ANNOTATION, SYNC_REQUEST_ANNOTATION, SYNC_REVISION_ANNOTATION,
};
use crate::install::{BREAK_GLASS_GROUP, SERVICE_ACCOUNT};

/// Name of the policy and of its binding.
pub const POLICY_NAME: &str = "tether-single-writer";

/// Users Kubernetes' own components write as.
const KUBERNETES_USERS: &[&str] = &["system:kube-controller-manager", "system:kube-scheduler"];
/// Controllers running with their own service-account credentials.
const KUBERNETES_SERVICE_ACCOUNTS: &str = "system:serviceaccount:kube-system:";
const NODES_GROUP: &str = "system:nodes";

/// Who may write to Tether's objects, and where the rule applies.
///
/// ```
/// use tether_controller::single_writer::SingleWriter;
/// let rule = SingleWriter::new("tether-system").with_writer("kube-local-admin");
/// let [policy, binding] = rule.manifests();
/// assert_eq!(policy["kind"], "ValidatingAdmissionPolicy");
/// assert_eq!(binding["spec"]["validationActions"][0], "Deny");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SingleWriter {
    /// Name of the policy and its binding.
    pub name: String,
    /// Users that may write: Tether's service account and any others.
    pub writers: Vec<String>,
    pub break_glass_group: String,
    /// Only objects in these namespaces (every namespace when empty;
    /// cluster-scoped objects are always covered).
    pub namespaces: Vec<String>,
}

impl SingleWriter {
    /// The rule for a Tether installed in `namespace`: only its service
    /// account writes, break-glass is [`BREAK_GLASS_GROUP`].
    pub fn new(namespace: &str) -> Self {
        SingleWriter {
            name: POLICY_NAME.into(),
            writers: vec![service_account_user(namespace)],
            break_glass_group: BREAK_GLASS_GROUP.into(),
            namespaces: Vec::new(),
        }
    }

    /// The same rule with one more allowed user.
    pub fn with_writer(mut self, user: impl Into<String>) -> Self {
        self.writers.push(user.into());
        self
    }

    /// The policy and its binding.
    pub fn manifests(&self) -> [Value; 2] {
        [self.policy(), self.binding()]
    }

    fn policy(&self) -> Value {
        let username = "request.userInfo.username";
        let tracking = cel(TRACKING_ANNOTATION);
        let key = cel(APP_LABEL);
        // A label added by this very update is only on the new object.
        let label = format!(
            "(has(oldObject.metadata.labels) && {key} in oldObject.metadata.labels \
             ? oldObject.metadata.labels[{key}] : object.metadata.labels[{key}])"
        );
        let app = format!(
            "has(oldObject.metadata.annotations) && {tracking} in oldObject.metadata.annotations \
             ? oldObject.metadata.annotations[{tracking}].split(':')[0] \
             : 'of label ' + {label}"
        );
        let object = "request.kind.kind + ' ' + \
            (request.namespace != '' ? request.namespace + '/' : '') + request.name";
        let group = cel(&self.break_glass_group);
        let message = format!(
            "{object} + ' is managed by Tether app ' + variables.app + \
             ': change it in Git, or open a break-glass window (tether break-glass open …) \
             and act as a member of ' + {group}"
        );
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": self.name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
                    "operations": ["UPDATE", "DELETE"], "resources": ["*"]}],
                "objectSelector": {"matchExpressions": [{"key": APP_LABEL, "operator": "Exists"}]}
            },
            "matchConditions": [
                {"name": "not-a-writer",
                 "expression": format!("!({username} in {})", cel_list(&self.writers))},
                {"name": "not-kubernetes",
                 "expression": format!(
                    "!({username} in {users}) && !{username}.startsWith({accounts}) \
                     && !(has(request.userInfo.groups) && {nodes} in request.userInfo.groups)",
                    users = cel_list(KUBERNETES_USERS),
                    accounts = cel(KUBERNETES_SERVICE_ACCOUNTS),
                    nodes = cel(NODES_GROUP))},
                {"name": "not-an-operator-request", "expression": format!("!({})", operator_request())}
            ],
            "variables": [{"name": "app", "expression": app}],
            "validations": [{
                "expression": format!(
                    "has(request.userInfo.groups) && {group} in request.userInfo.groups"),
                "message": format!(
                    "this object is managed by Tether: change it in Git, or open a break-glass \
                     window (tether break-glass open …) and act as a member of {}",
                    self.break_glass_group),
                "messageExpression": message,
                "reason": "Forbidden"
            }]
        }})
    }

    fn binding(&self) -> Value {
        let mut spec = json!({"policyName": self.name, "validationActions": ["Deny"]});
        if !self.namespaces.is_empty() {
            spec["matchResources"] = json!({"namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": self.namespaces}
            ]}});
        }
        json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": self.name}, "spec": spec})
    }
}

/// CEL that is true of an update to an Application that changes only what
/// operators ask Tether for: the sync request annotations (`tether sync`)
/// and `spec.pin` (`tether rollback`). On an Application another app
/// manages (app of apps) that changes nothing the other app declares, so it
/// is no drift; RBAC still decides who may ask.
fn operator_request() -> String {
    let requests = cel_list(&[
        SYNC_REQUEST_ANNOTATION,
        SYNC_REVISION_ANNOTATION,
        ALLOW_MASS_PRUNE_ANNOTATION,
    ]);
    let unchanged = |field: &str| {
        format!(
            "has(object.metadata.{field}) == has(oldObject.metadata.{field}) && \
             (!has(object.metadata.{field}) || object.metadata.{field} == oldObject.metadata.{field})"
        )
    };
    // Every key of `new` but the asked-for ones is in `old` with the same
    // value (`same`), or at least is in `old` (for keys taken away).
    let kept = |new: &str, old: &str, same: bool| {
        let value = match same {
            true => format!(" && {old}[k] == {new}[k]"),
            false => String::new(),
        };
        format!(
            "(!has({new}) || {new}.all(k, k in {requests} || \
             (has({old}) && k in {old}{value})))"
        )
    };
    let (annotations, old_annotations) = (
        "object.metadata.annotations",
        "oldObject.metadata.annotations",
    );
    [
        "request.operation == 'UPDATE'".to_string(),
        "request.kind.group == 'tether.dev'".to_string(),
        "request.kind.kind == 'Application'".to_string(),
        "object.spec.all(k, k == 'pin' || (k in oldObject.spec && object.spec[k] == oldObject.spec[k]))"
            .to_string(),
        "oldObject.spec.all(k, k == 'pin' || k in object.spec)".to_string(),
        unchanged("labels"),
        unchanged("finalizers"),
        unchanged("ownerReferences"),
        kept(annotations, old_annotations, true),
        kept(old_annotations, annotations, false),
    ]
    .join(" && ")
}

/// The user name Tether's service account in `namespace` authenticates as.
pub fn service_account_user(namespace: &str) -> String {
    format!("system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}")
}

/// Applies the policy and its binding (server-side apply as `tether`).
pub async fn enforce(
    client: kube::Client,
    rule: &SingleWriter,
) -> Result<Vec<(ObjectRef, Action)>, ClusterError> {
    let applier = Applier::new(Resources::new(client), "default");
    let mut results = Vec::new();
    for manifest in rule.manifests() {
        let applied = applier.apply(&manifest, false).await?;
        results.push((applied.object, applied.action));
    }
    Ok(results)
}

/// Removes the binding and the policy named `name`; absent ones are fine.
pub async fn lift(client: kube::Client, name: &str) -> Result<(), kube::Error> {
    let params = DeleteParams::default();
    absent(
        Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
            .delete(name, &params)
            .await,
    )?;
    absent(
        Api::<ValidatingAdmissionPolicy>::all(client)
            .delete(name, &params)
            .await,
    )
}

fn absent<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other.map(|_| ()),
    }
}

/// A CEL string literal: a JSON string is one.
fn cel(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}

fn cel_list<S: AsRef<str>>(items: &[S]) -> String {
    let quoted: Vec<String> = items.iter().map(|item| cel(item.as_ref())).collect();
    format!("[{}]", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_lets_only_writers_kubernetes_and_break_glass_through() {
        let rule = SingleWriter::new("tether-system").with_writer("kube-local-admin");
        let [policy, _] = rule.manifests();
        let spec = &policy["spec"];
        let rules = &spec["matchConstraints"]["resourceRules"][0];
        assert_eq!(rules["operations"], json!(["UPDATE", "DELETE"]));
        assert_eq!(rules["resources"], json!(["*"]));
        assert_eq!(
            spec["matchConstraints"]["objectSelector"]["matchExpressions"][0]["key"],
            APP_LABEL
        );
        let writers = spec["matchConditions"][0]["expression"].as_str().unwrap();
        assert_eq!(
            writers,
            r#"!(request.userInfo.username in ["system:serviceaccount:tether-system:tether-controller", "kube-local-admin"])"#
        );
        let validation = spec["validations"][0]["expression"].as_str().unwrap();
        assert!(validation.ends_with(r#""tether:break-glass" in request.userInfo.groups"#));
    }

    #[test]
    fn a_binding_scoped_to_namespaces_selects_them_by_name() {
        let mut rule = SingleWriter::new("tether-system");
        rule.name = "tether-single-writer-test".into();
        rule.namespaces = vec!["shop".into()];
        let [_, binding] = rule.manifests();
        assert_eq!(binding["spec"]["policyName"], "tether-single-writer-test");
        assert_eq!(
            binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"],
            json!(["shop"])
        );
        let [_, everywhere] = SingleWriter::new("tether-system").manifests();
        assert!(everywhere["spec"].get("matchResources").is_none());
    }

    #[test]
    fn an_update_that_only_asks_for_a_sync_or_a_rollback_is_not_judged() {
        let [policy, _] = SingleWriter::new("tether-system").manifests();
        let conditions = policy["spec"]["matchConditions"].as_array().unwrap();
        let request = conditions
            .iter()
            .find(|c| c["name"] == "not-an-operator-request")
            .unwrap()["expression"]
            .as_str()
            .unwrap();
        assert!(request.starts_with("!(request.operation == 'UPDATE' && "));
        for asked in [
            SYNC_REQUEST_ANNOTATION,
            SYNC_REVISION_ANNOTATION,
            ALLOW_MASS_PRUNE_ANNOTATION,
            "k == 'pin'",
        ] {
            assert_contains(request, asked);
        }
    }

    fn assert_contains(text: &str, part: &str) {
        assert!(text.contains(part), "{part:?} not in {text}");
    }

    #[test]
    fn quoting_survives_awkward_names() {
        assert_eq!(cel(r#"o"dd\name"#), r#""o\"dd\\name""#);
    }
}
