//! Kubernetes objects the tests need as plain manifests.

use serde_json::{Value, json};

/// A namespaced CustomResourceDefinition of `kind` (plural: `kind`
/// lower-cased with an `s`) in `group`, serving `v1` with `schema` as its
/// OpenAPI schema.
pub fn crd(group: &str, kind: &str, schema: Value) -> Value {
    let singular = kind.to_lowercase();
    let plural = format!("{singular}s");
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": plural, "singular": singular, "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema}}]}
    })
}
