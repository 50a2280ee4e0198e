//! Asking the controller for a sync: `tether sync APP [--allow-mass-prune]`
//! annotates the Application; the controller syncs everything, honours the
//! confirmation for one prune, and removes both annotations.

use kube::Client;
use kube::api::{Api, Patch, PatchParams};

use crate::api::Application;
use crate::api::application::{ALLOW_MASS_PRUNE_ANNOTATION, SYNC_REQUEST_ANNOTATION};

/// Requests a sync of Application `namespace/name`, confirming a prune the
/// circuit breaker stopped when `allow_mass_prune`.
pub async fn request_sync(
    client: Client,
    namespace: &str,
    name: &str,
    allow_mass_prune: bool,
) -> Result<(), kube::Error> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let mut annotations = serde_json::json!({ SYNC_REQUEST_ANNOTATION: now });
    if allow_mass_prune {
        annotations[ALLOW_MASS_PRUNE_ANNOTATION] = serde_json::Value::String(now);
    }
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    Api::<Application>::namespaced(client, namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}
