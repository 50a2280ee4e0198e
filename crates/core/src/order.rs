//! Apply order: which object goes to the API server first.
//!
//! The order is data ([`KIND_ORDER`]), modelled on Helm's install order:
//! Namespaces and CustomResourceDefinitions before anything that may live in
//! them or be an instance of them, then policy, identity, configuration,
//! storage, RBAC, networking and workloads, with admission webhooks last so a
//! half-installed webhook cannot block the objects before it. Kinds not in
//! the table (custom resources, mostly) go after all known kinds.
//!
//! Within that, the `tether.dev/sync-wave` annotation groups objects into
//! waves applied in ascending order; Namespaces and CRDs always precede every
//! wave because nothing in any wave can be created without them. Argo CD's
//! `argocd.argoproj.io/sync-wave` is read as an alias when Tether's is not
//! set (when both are, Tether's wins: see [`crate::argocd`]).

use serde_json::Value;

use crate::object::ObjectRef;

/// The annotation that puts an object in a sync wave (an integer, default 0).
pub const SYNC_WAVE_ANNOTATION: &str = "tether.dev/sync-wave";

/// Known kinds in the order they are applied.
pub const KIND_ORDER: &[&str] = &[
    "Namespace",
    "CustomResourceDefinition",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PodDisruptionBudget",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "DaemonSet",
    "Pod",
    "ReplicationController",
    "ReplicaSet",
    "Deployment",
    "HorizontalPodAutoscaler",
    "StatefulSet",
    "Job",
    "CronJob",
    "IngressClass",
    "Ingress",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

/// Kinds that must exist before any wave: everything else may depend on them.
const FOUNDATION_KINDS: &[&str] = &["Namespace", "CustomResourceDefinition"];

/// Where an object sits in the apply order; smaller goes first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApplyPosition {
    stage: u8,
    wave: i32,
    kind_rank: usize,
    id: ObjectRef,
}

impl ApplyPosition {
    pub fn wave(&self) -> i32 {
        self.wave
    }
}

/// Why an object's place in the order could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {annotation}: {value:?} is not an integer")]
pub struct BadSyncWave {
    /// The annotation read: Tether's, or Argo CD's alias.
    pub annotation: &'static str,
    pub value: String,
}

/// The position of `object` (whose identity is `id`) in the apply order.
pub fn apply_position(id: &ObjectRef, object: &Value) -> Result<ApplyPosition, BadSyncWave> {
    let foundation = FOUNDATION_KINDS.contains(&id.kind.as_str());
    Ok(ApplyPosition {
        stage: if foundation { 0 } else { 1 },
        wave: if foundation { 0 } else { sync_wave(object)? },
        kind_rank: kind_rank(&id.kind),
        id: id.clone(),
    })
}

/// The rank of `kind` in [`KIND_ORDER`]; unknown kinds rank after all known ones.
pub fn kind_rank(kind: &str) -> usize {
    KIND_ORDER
        .iter()
        .position(|known| *known == kind)
        .unwrap_or(KIND_ORDER.len())
}

/// The sync wave of `object`: its `tether.dev/sync-wave` annotation, else
/// its `argocd.argoproj.io/sync-wave`, else 0.
pub fn sync_wave(object: &Value) -> Result<i32, BadSyncWave> {
    let annotation = |key| {
        object
            .pointer("/metadata/annotations")
            .and_then(|annotations| annotations.get(key))
            .filter(|value| !value.is_null())
    };
    let (annotation, value) = match annotation(SYNC_WAVE_ANNOTATION) {
        Some(value) => (SYNC_WAVE_ANNOTATION, value),
        None => match annotation(crate::argocd::SYNC_WAVE_ANNOTATION) {
            Some(value) => (crate::argocd::SYNC_WAVE_ANNOTATION, value),
            None => return Ok(0),
        },
    };
    let bad = |value: String| BadSyncWave { annotation, value };
    match value {
        Value::String(text) => text.trim().parse().map_err(|_| bad(text.clone())),
        other => Err(bad(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(api_version: &str, kind: &str, name: &str, wave: Option<&str>) -> Value {
        let mut object = json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "shop"}});
        if let Some(wave) = wave {
            object["metadata"]["annotations"] = json!({ SYNC_WAVE_ANNOTATION: wave });
        }
        object
    }

    fn sorted_names(objects: &[Value]) -> Vec<String> {
        let mut positions: Vec<ApplyPosition> = objects
            .iter()
            .map(|o| apply_position(&ObjectRef::from_object(o).unwrap(), o).unwrap())
            .collect();
        positions.sort();
        positions.into_iter().map(|p| p.id.name).collect()
    }

    #[test]
    fn namespaces_and_crds_go_before_everything_else_even_later_waves() {
        let objects = [
            object("apps/v1", "Deployment", "web", Some("-5")),
            object("example.com/v1", "Widget", "w", None),
            object(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                "widgets",
                None,
            ),
            object("v1", "Namespace", "shop", Some("10")),
        ];
        assert_eq!(sorted_names(&objects), ["shop", "widgets", "web", "w"]);
    }

    #[test]
    fn within_a_wave_configuration_precedes_workloads_and_custom_resources_come_last() {
        let objects = [
            object("example.com/v1", "Widget", "a-widget", None),
            object("apps/v1", "Deployment", "b-web", None),
            object("v1", "Service", "c-svc", None),
            object("v1", "ConfigMap", "d-config", None),
        ];
        assert_eq!(
            sorted_names(&objects),
            ["d-config", "c-svc", "b-web", "a-widget"]
        );
    }

    #[test]
    fn waves_order_objects_before_kinds_do() {
        let objects = [
            object("v1", "ConfigMap", "late-config", Some("2")),
            object("apps/v1", "Deployment", "early-web", Some("1")),
        ];
        assert_eq!(sorted_names(&objects), ["early-web", "late-config"]);
    }

    #[test]
    fn argo_cd_sync_waves_order_objects_unless_tethers_own_says_otherwise() {
        let argo = |name: &str, wave: &str| {
            let mut object = object("v1", "ConfigMap", name, None);
            object["metadata"]["annotations"] =
                json!({ crate::argocd::SYNC_WAVE_ANNOTATION: wave });
            object
        };
        let mut both = argo("both", "-3");
        both["metadata"]["annotations"][SYNC_WAVE_ANNOTATION] = json!("5");
        let objects = [
            argo("late", "2"),
            object("v1", "ConfigMap", "plain", None),
            argo("early", "-1"),
            both,
        ];
        assert_eq!(sorted_names(&objects), ["early", "plain", "late", "both"]);
        assert_eq!(
            sync_wave(&argo("x", "soon")).unwrap_err().to_string(),
            "annotation argocd.argoproj.io/sync-wave: \"soon\" is not an integer"
        );
    }

    #[test]
    fn a_sync_wave_that_is_not_an_integer_is_an_error() {
        let bad = object("v1", "ConfigMap", "x", Some("soon"));
        assert_eq!(
            sync_wave(&bad).unwrap_err().to_string(),
            "annotation tether.dev/sync-wave: \"soon\" is not an integer"
        );
    }
}
