//! `tether rollback APP`: pin an Application to an earlier revision of its
//! sync history (`spec.pin`), or lift the pin.
//!
//! Which revision is `tether_core::rollback::pick`'s decision; this module
//! reads the Application, asks the API server who the caller is (a
//! SelfSubjectReview) and writes the pin. Nothing is written when the
//! history has no such entry.

use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use tether_core::rollback::{PickError, Pinned, Synced, Target, pick};

use crate::api::Application;
use crate::api::pin::Pin;
use crate::break_glass::request::{RequestError, whoami};

/// Why a rollback (or lifting a pin) was not done. Each names the app.
#[derive(Debug, thiserror::Error)]
pub enum RollbackError {
    #[error(transparent)]
    Pick(#[from] PickError),
    #[error("Application {app}: is not pinned; there is no pin to clear")]
    NotPinned { app: String },
    #[error("Application {app}: {error}")]
    Identity { app: String, error: RequestError },
    #[error("Application {app}: {}", tether_cluster::error::describe(.error))]
    Api { app: String, error: kube::Error },
}

/// The revision `app` would be rolled back to: history entry `to`, else
/// the previous revision synced.
pub fn target(app: &Application, to: Option<u64>) -> Result<Target, PickError> {
    let name = format!("{}/{}", app.namespace().unwrap_or_default(), app.name_any());
    let status = app.status.as_ref();
    let history: Vec<Synced<'_>> = status
        .map(|s| s.history.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|entry| Synced {
            id: entry.id,
            revision: &entry.revision,
        })
        .collect();
    let current = status.and_then(|s| s.sync.revision.as_deref());
    let pinned = app.spec.pin.as_ref().map(|pin| Pinned {
        revision: &pin.revision,
        id: pin.history_id,
    });
    pick(&name, &history, current, pinned, to)
}

/// Pins Application `namespace/name` to history entry `to` (else the
/// previous revision synced), as the caller, giving `reason`; returns
/// the pin written.
pub async fn pin(
    client: &Client,
    namespace: &str,
    name: &str,
    to: Option<u64>,
    reason: &str,
) -> Result<Pin, RollbackError> {
    let app_name = format!("{namespace}/{name}");
    let failed = |error| RollbackError::Api {
        app: app_name.clone(),
        error,
    };
    let api = Api::<Application>::namespaced(client.clone(), namespace);
    let app = api.get(name).await.map_err(failed)?;
    let target = target(&app, to)?;
    let by = whoami(client)
        .await
        .map_err(|error| RollbackError::Identity {
            app: app_name.clone(),
            error,
        })?
        .username;
    let pin = Pin {
        revision: target.revision,
        history_id: (target.id != 0).then_some(target.id),
        by,
        reason: reason.to_string(),
        since: k8s_openapi::jiff::Timestamp::now().to_string(),
    };
    let patch = serde_json::json!({"spec": {"pin": pin}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(failed)?;
    Ok(pin)
}

/// Lifts the pin of Application `namespace/name`; returns the pin lifted.
pub async fn clear(client: &Client, namespace: &str, name: &str) -> Result<Pin, RollbackError> {
    let app_name = format!("{namespace}/{name}");
    let failed = |error| RollbackError::Api {
        app: app_name.clone(),
        error,
    };
    let api = Api::<Application>::namespaced(client.clone(), namespace);
    let app = api.get(name).await.map_err(failed)?;
    let Some(pin) = app.spec.pin else {
        return Err(RollbackError::NotPinned { app: app_name });
    };
    let patch = serde_json::json!({"spec": {"pin": null}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(failed)?;
    Ok(pin)
}
