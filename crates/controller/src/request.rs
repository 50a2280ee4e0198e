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

/// Why a sync was not requested.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A one-off revision on an automated Application would be undone at
    /// once: the next reconcile returns it to its own revision.
    #[error(
        "Application {app}: syncs automatically, so a sync to {revision} would be undone by the next reconcile (it follows {own}); to hold another revision, set spec.syncPolicy.automated: false first"
    )]
    Automated {
        app: String,
        revision: String,
        own: String,
    },
    #[error("Application {app}: {}", tether_cluster::error::describe(.source))]
    Api { app: String, source: kube::Error },
}

/// Requests a sync of Application `namespace/name`, confirming a prune the
/// circuit breaker stopped when `allow_mass_prune`.
pub async fn request_sync(
    client: Client,
    namespace: &str,
    name: &str,
    allow_mass_prune: bool,
) -> Result<(), RequestError> {
    let request = SyncRequest {
        allow_mass_prune,
        revision: None,
    };
    request_sync_with(client, namespace, name, &request).await?;
    Ok(())
}

/// Whether `request` makes sense for `app`: a one-off revision does not on
/// an automated Application.
pub fn check(app: &Application, request: &SyncRequest) -> Result<(), RequestError> {
    match &request.revision {
        Some(revision) if app.spec.sync_policy.automated => Err(RequestError::Automated {
            app: format!("{}/{}", app.namespace().unwrap_or_default(), app.name_any()),
            revision: revision.clone(),
            own: match app.spec.sources()[0].revision.as_str() {
                "" => "HEAD".to_string(),
                own => own.to_string(),
            },
        }),
        _ => Ok(()),
    }
}

/// Requests `request` of Application `namespace/name`; returns the
/// request's time stamp, which stays on the Application until the
/// controller has handled the request.
pub async fn request_sync_with(
    client: Client,
    namespace: &str,
    name: &str,
    request: &SyncRequest,
) -> Result<String, RequestError> {
    let api = Api::<Application>::namespaced(client, namespace);
    let failed = |source| RequestError::Api {
        app: format!("{namespace}/{name}"),
        source,
    };
    if request.revision.is_some() {
        check(&api.get(name).await.map_err(failed)?, request)?;
    }
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
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(failed)?;
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

/// Removes the handled `tether sync` annotations from the Application:
/// only those it still carries with the values this reconcile read from
/// `app`. A request made meanwhile (a second `tether sync`, another
/// revision) changed them, so the patch's tests fail and that request
/// stays for the next reconcile, which its own annotation change wakes.
pub async fn clear(client: &Client, app: &Application) {
    let Some(patch) = clearing(app) else {
        return;
    };
    match crate::guarded::patch(client, app, patch).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::debug!(app = %app.name_any(), "a newer sync request arrived; kept for the next reconcile");
        }
        Err(error) => {
            tracing::warn!(app = %app.name_any(), %error, "clearing the sync request failed");
        }
    }
}

/// The JSON patch that removes the request annotations `app` carries,
/// each only if it still has the value read: a `test` then a `remove` per
/// annotation. `None` when there is no request to clear.
fn clearing(app: &Application) -> Option<json_patch::Patch> {
    let annotations = app.annotations();
    if !annotations.contains_key(SYNC_REQUEST_ANNOTATION)
        && !annotations.contains_key(ALLOW_MASS_PRUNE_ANNOTATION)
    {
        return None;
    }
    let mut operations = Vec::new();
    for name in [
        SYNC_REQUEST_ANNOTATION,
        ALLOW_MASS_PRUNE_ANNOTATION,
        SYNC_REVISION_ANNOTATION,
    ] {
        let Some(value) = annotations.get(name) else {
            continue;
        };
        // RFC 6901: `~` and `/` in a key are escaped.
        let path = format!(
            "/metadata/annotations/{}",
            name.replace('~', "~0").replace('/', "~1")
        );
        operations.push(serde_json::json!({"op": "test", "path": path, "value": value}));
        operations.push(serde_json::json!({"op": "remove", "path": path}));
    }
    serde_json::from_value(serde_json::Value::Array(operations)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(automated: bool) -> Application {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "tether"},
            "spec": {"source": {"repoURL": "file:///srv/git/shop.git", "revision": "main"},
                     "destination": {"namespace": "shop"},
                     "syncPolicy": {"automated": automated}}
        }))
        .unwrap()
    }

    #[test]
    fn clearing_removes_each_request_annotation_only_if_it_still_has_the_value_handled() {
        let mut handled = app(false);
        handled.annotations_mut().extend([
            (
                SYNC_REQUEST_ANNOTATION.to_string(),
                "2026-12-05T08:00:00Z".to_string(),
            ),
            (SYNC_REVISION_ANNOTATION.to_string(), "v1".to_string()),
        ]);
        let patch = serde_json::to_value(clearing(&handled).unwrap()).unwrap();
        let request = format!(
            "/metadata/annotations/{}",
            SYNC_REQUEST_ANNOTATION.replace('/', "~1")
        );
        assert_eq!(
            patch[0],
            serde_json::json!({"op": "test", "path": request, "value": "2026-12-05T08:00:00Z"})
        );
        assert_eq!(
            patch[1],
            serde_json::json!({"op": "remove", "path": request})
        );
        assert_eq!(patch.as_array().unwrap().len(), 4);
        // A newer request (another stamp) makes the test fail: applying the
        // patch to the app as it is now leaves the request in place.
        let mut now = serde_json::to_value(&handled).unwrap();
        now["metadata"]["annotations"][SYNC_REQUEST_ANNOTATION] = "2026-12-05T08:00:01Z".into();
        let patch = clearing(&handled).unwrap();
        assert!(json_patch::patch(&mut now, &patch).is_err());
        assert_eq!(
            now["metadata"]["annotations"][SYNC_REQUEST_ANNOTATION],
            "2026-12-05T08:00:01Z"
        );
        assert!(clearing(&app(false)).is_none());
    }

    #[test]
    fn a_one_off_revision_is_refused_on_an_automated_app_and_says_what_to_do() {
        let older = SyncRequest {
            revision: Some("v1.2.0".into()),
            ..SyncRequest::default()
        };
        let refused = check(&app(true), &older).unwrap_err().to_string();
        assert_eq!(
            refused,
            "Application tether/shop: syncs automatically, so a sync to v1.2.0 would be undone by the next reconcile (it follows main); to hold another revision, set spec.syncPolicy.automated: false first"
        );
        assert!(check(&app(false), &older).is_ok());
        assert!(check(&app(true), &SyncRequest::default()).is_ok());
    }

    #[test]
    fn a_refused_request_says_the_api_servers_words_once_and_no_struct() {
        let message = "applications.tether.dev \"child\" is forbidden: ValidatingAdmissionPolicy 'tether-single-writer' with binding 'tether-single-writer' denied request: Application apps/child is managed by Tether app parent";
        let status = kube::core::Status::failure(message, "Forbidden").with_code(403);
        let refused = RequestError::Api {
            app: "apps/child".into(),
            source: kube::Error::Api(status.boxed()),
        };
        assert_eq!(
            refused.to_string(),
            format!("Application apps/child: {message} (Forbidden)")
        );
    }
}
