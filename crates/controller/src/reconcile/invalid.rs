//! An Application that does not decode: reported, never reconciled.
//!
//! It gets the `Reconciled` condition `False` with reason `InvalidSpec`,
//! naming the field, and a Warning event; everything else about it is left
//! alone (its objects are neither synced nor pruned) until it is fixed,
//! which the watch notices.

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action as Next;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::json;
use tether_core::notice::EventReason;

use crate::api::stored::INVALID_SPEC_REASON;
use crate::api::{InvalidSpec, StoredApplication};
use crate::context::Context;

/// Why reporting an invalid Application failed.
#[derive(Debug, thiserror::Error)]
#[error(
    "Application {namespace}/{name}: writing the InvalidSpec condition failed: {}",
    tether_cluster::error::describe(.error)
)]
pub struct ReportError {
    namespace: String,
    name: String,
    error: kube::Error,
}

/// Writes the `InvalidSpec` condition of `app` (unless it says so
/// already) and emits a Warning event; waits for the next change.
pub async fn report(
    ctx: &Context,
    app: &StoredApplication,
    invalid: &InvalidSpec,
) -> Result<Next, ReportError> {
    let namespace = app.namespace().unwrap_or_default();
    let name = app.name_any();
    let message = format!("Application {namespace}/{name}: {invalid}");
    if invalid.reported {
        return Ok(Next::await_change());
    }
    tracing::warn!(%message, "not reconciled");
    let api: Api<StoredApplication> = Api::namespaced(ctx.client.clone(), &namespace);
    let status = json!({"status": {
        "sync": {"status": "Unknown"},
        "conditions": [{
            "type": "Reconciled", "status": "False", "reason": INVALID_SPEC_REASON,
            "message": message,
            "lastTransitionTime": k8s_openapi::jiff::Timestamp::now().to_string(),
        }],
    }});
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .map_err(|error| ReportError {
            namespace: namespace.clone(),
            name: name.clone(),
            error,
        })?;
    ctx.recorder
        .tell(
            &app.object_ref(&()),
            EventType::Warning,
            EventReason::InvalidSpec,
            "Decode",
            message,
        )
        .await;
    Ok(Next::await_change())
}
