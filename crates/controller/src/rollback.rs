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
    let stored = Stored::new(client, namespace, name);
    let app = stored.get().await?;
    let target = target(&app, to)?;
    let by = whoami(client)
        .await
        .map_err(|error| RollbackError::Identity {
            app: stored.app_name(),
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
    stored.set_pin(Some(&pin)).await?;
    Ok(pin)
}

/// Lifts the pin of Application `namespace/name`; returns the pin lifted.
pub async fn clear(client: &Client, namespace: &str, name: &str) -> Result<Pin, RollbackError> {
    let stored = Stored::new(client, namespace, name);
    let app = stored.get().await?;
    let Some(pin) = app.spec.pin else {
        return Err(RollbackError::NotPinned {
            app: stored.app_name(),
        });
    };
    stored.set_pin(None).await?;
    Ok(pin)
}

/// Application `namespace/name` as the API server stores it: read, and
/// its pin written, each failure naming the app.
struct Stored<'a> {
    api: Api<Application>,
    namespace: &'a str,
    name: &'a str,
}

impl<'a> Stored<'a> {
    fn new(client: &Client, namespace: &'a str, name: &'a str) -> Self {
        Stored {
            api: Api::namespaced(client.clone(), namespace),
            namespace,
            name,
        }
    }

    /// `namespace/name`, as errors name the app.
    fn app_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn failed(&self, error: kube::Error) -> RollbackError {
        RollbackError::Api {
            app: self.app_name(),
            error,
        }
    }

    async fn get(&self) -> Result<Application, RollbackError> {
        self.api.get(self.name).await.map_err(|e| self.failed(e))
    }

    /// Sets `spec.pin` to `pin`; `None` removes it.
    async fn set_pin(&self, pin: Option<&Pin>) -> Result<(), RollbackError> {
        let patch = serde_json::json!({"spec": {"pin": pin}});
        self.api
            .patch(self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| self.failed(e))?;
        Ok(())
    }
}
