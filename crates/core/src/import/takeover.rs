//! Taking over what Argo CD or Flux applied: once an imported app has
//! adopted an object (applied it with force as `tether`, marked
//! `tether.dev/adopted`), the old tool's field manager is dropped from the
//! object's `managedFields`, so Tether is its only GitOps writer and the
//! audit of other writers is clean. Nothing is deleted or recreated, and
//! no field changes value.
//!
//! The old tool's marks — Argo CD's `app.kubernetes.io/instance` label and
//! `argocd.argoproj.io/tracking-id` annotation, Flux's
//! `kustomize.toolkit.fluxcd.io/*` and `helm.toolkit.fluxcd.io/*` labels —
//! are kept, owned by nobody: the instance label is Kubernetes' recommended
//! label and often what dashboards and selectors use, and removing a mark
//! would be a write for no gain. Without a manager they are not drift and
//! Tether never reverts them; Git can still set or drop them.

use serde_json::{Value, json};

use crate::ownership::is_adopted;

/// The field managers Argo CD and Flux apply with.
pub const GITOPS_MANAGERS: [&str; 4] = [
    "argocd-controller",
    "argocd-application-controller",
    "kustomize-controller",
    "helm-controller",
];

/// The labels and annotations by which Argo CD and Flux track what they
/// applied (kept on take-over; see the module documentation).
pub const TRACKING_MARKS: [&str; 6] = [
    "app.kubernetes.io/instance",
    "argocd.argoproj.io/tracking-id",
    "kustomize.toolkit.fluxcd.io/name",
    "kustomize.toolkit.fluxcd.io/namespace",
    "helm.toolkit.fluxcd.io/name",
    "helm.toolkit.fluxcd.io/namespace",
];

/// The merge patch that drops Argo CD's and Flux's field managers from
/// `live`, an object Tether adopted (guarded by its resourceVersion); none
/// when it has none of them, or is not adopted.
pub fn release_patch(live: &Value) -> Option<Value> {
    if !is_adopted(live) {
        return None;
    }
    let entries = live.pointer("/metadata/managedFields")?.as_array()?;
    let foreign = |entry: &Value| {
        entry["manager"]
            .as_str()
            .is_some_and(|manager| GITOPS_MANAGERS.contains(&manager))
    };
    let kept: Vec<Value> = entries.iter().filter(|e| !foreign(e)).cloned().collect();
    // An empty list would ask the API server to leave them as they are.
    if kept.len() == entries.len() || kept.is_empty() {
        return None;
    }
    let version = live.pointer("/metadata/resourceVersion")?.clone();
    Some(json!({"metadata": {"resourceVersion": version, "managedFields": kept}}))
}

/// The managers [`release_patch`] drops from `live`.
pub fn released_managers(live: &Value) -> Vec<String> {
    let mut managers: Vec<String> = super::entry_texts(live, "/metadata/managedFields", "manager")
        .filter(|manager| GITOPS_MANAGERS.contains(manager))
        .map(str::to_string)
        .collect();
    managers.dedup();
    managers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(adopted: bool, managers: &[&str]) -> Value {
        let entries: Vec<Value> = managers
            .iter()
            .map(|m| json!({"manager": m, "operation": "Apply", "fieldsV1": {}}))
            .collect();
        let annotations = match adopted {
            true => json!({"tether.dev/adopted": "true"}),
            false => json!({}),
        };
        json!({"metadata": {"name": "web", "resourceVersion": "7",
            "annotations": annotations, "managedFields": entries}})
    }

    #[test]
    fn an_adopted_object_loses_argo_cds_manager_and_keeps_the_others() {
        let live = object(
            true,
            &["argocd-controller", "tether", "kube-controller-manager"],
        );
        let patch = release_patch(&live).unwrap();
        let kept: Vec<&str> = patch["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(kept, ["tether", "kube-controller-manager"]);
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(released_managers(&live), ["argocd-controller"]);
    }

    #[test]
    fn nothing_is_released_from_an_object_tether_did_not_adopt_or_flux_no_longer_holds() {
        assert_eq!(
            release_patch(&object(false, &["kustomize-controller", "tether"])),
            None
        );
        assert_eq!(
            release_patch(&object(true, &["tether", "kubectl-edit"])),
            None
        );
    }
}
