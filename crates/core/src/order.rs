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
//! wave because nothing in any wave can be created without them.

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
#[error("annotation {SYNC_WAVE_ANNOTATION}: {value:?} is not an integer")]
pub struct BadSyncWave {
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

/// The sync wave of `object`: its `tether.dev/sync-wave` annotation, or 0.
pub fn sync_wave(object: &Value) -> Result<i32, BadSyncWave> {
    match object
        .pointer("/metadata/annotations")
        .and_then(|annotations| annotations.get(SYNC_WAVE_ANNOTATION))
    {
        None | Some(Value::Null) => Ok(0),
        Some(Value::String(text)) => text.trim().parse().map_err(|_| BadSyncWave {
            value: text.clone(),
        }),
        Some(other) => Err(BadSyncWave {
            value: other.to_string(),
        }),
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
    fn a_sync_wave_that_is_not_an_integer_is_an_error() {
        let bad = object("v1", "ConfigMap", "x", Some("soon"));
        assert_eq!(
            sync_wave(&bad).unwrap_err().to_string(),
            "annotation tether.dev/sync-wave: \"soon\" is not an integer"
        );
    }
}
