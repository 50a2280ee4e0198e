//! Asking the controller for a sync: `tether sync APP [--revision R]
//! [--allow-mass-prune]` annotates the Application; the controller syncs
//! everything (at revision R for this one sync), honours the confirmation
//! for one prune, and removes the annotations.

use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};

use crate::api::Application;
use crate::api::application::{
    ALLOW_MASS_PRUNE_ANNOTATION, SYNC_REQUEST_ANNOTATION, SYNC_REVISION_ANNOTATION,
};

/// A sync asked for by an operator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncRequest {
    /// Confirm a prune the circuit breaker stopped.
    pub allow_mass_prune: bool,
    /// Sync to this branch, tag or commit once, instead of the source's
    /// revision.
    pub revision: Option<String>,
}

/// Requests a sync of Application `namespace/name`, confirming a prune the
/// circuit breaker stopped when `allow_mass_prune`.
pub async fn request_sync(
    client: Client,
    namespace: &str,
    name: &str,
    allow_mass_prune: bool,
) -> Result<(), kube::Error> {
    let request = SyncRequest {
        allow_mass_prune,
        revision: None,
    };
    request_sync_with(client, namespace, name, &request).await?;
    Ok(())
}

/// Requests `request` of Application `namespace/name`; returns the
/// request's time stamp, which stays on the Application until the
/// controller has handled the request.
pub async fn request_sync_with(
    client: Client,
    namespace: &str,
    name: &str,
    request: &SyncRequest,
) -> Result<String, kube::Error> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let mut annotations = serde_json::json!({ SYNC_REQUEST_ANNOTATION: now });
    if request.allow_mass_prune {
        annotations[ALLOW_MASS_PRUNE_ANNOTATION] = serde_json::Value::String(now.clone());
    }
    // Always set, so a revision left by an earlier request cannot linger.
    annotations[SYNC_REVISION_ANNOTATION] = match &request.revision {
        Some(revision) => serde_json::Value::String(revision.clone()),
        None => serde_json::Value::Null,
    };
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    Api::<Application>::namespaced(client, namespace)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(now)
}

/// The revision a pending `tether sync --revision` asks for, if any.
pub fn requested_revision(app: &Application) -> Option<&str> {
    let annotations = app.annotations();
    annotations.get(SYNC_REQUEST_ANNOTATION)?;
    annotations
        .get(SYNC_REVISION_ANNOTATION)
        .map(String::as_str)
        .filter(|revision| !revision.is_empty())
}

/// Whether the request stamped `requested_at` is still pending on `app`.
pub fn pending(app: &Application, requested_at: &str) -> bool {
    app.annotations()
        .get(SYNC_REQUEST_ANNOTATION)
        .is_some_and(|value| value == requested_at)
}

/// Removes the handled `tether sync` annotations from the Application.
pub async fn clear(client: &Client, app: &Application) {
    let annotations = app.annotations();
    if !annotations.contains_key(SYNC_REQUEST_ANNOTATION)
        && !annotations.contains_key(ALLOW_MASS_PRUNE_ANNOTATION)
    {
        return;
    }
    let api: Api<Application> =
        Api::namespaced(client.clone(), &app.namespace().unwrap_or_default());
    let patch = serde_json::json!({"metadata": {"annotations": {
        SYNC_REQUEST_ANNOTATION: null, ALLOW_MASS_PRUNE_ANNOTATION: null,
        SYNC_REVISION_ANNOTATION: null}}});
    if let Err(error) = api
        .patch(
            &app.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        tracing::warn!(app = %app.name_any(), %error, "clearing the sync request failed");
    }
}
