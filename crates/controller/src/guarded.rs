//! JSON patches of an Application guarded by `test` operations: each lands
//! only while the fields it tests still hold the values a reconcile read, so
//! a change made meanwhile (a newer request, a newer pin) is never undone.

use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};

use crate::api::Application;

/// Applies `patch` to `app`. `Ok(false)` when the Application changed
/// meanwhile: a `test` failed (422) or the write conflicted (409).
pub async fn patch(
    client: &Client,
    app: &Application,
    patch: json_patch::Patch,
) -> Result<bool, kube::Error> {
    let api: Api<Application> =
        Api::namespaced(client.clone(), &app.namespace().unwrap_or_default());
    match api
        .patch(
            &app.name_any(),
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 422 || status.code == 409 => Ok(false),
        Err(error) => Err(error),
    }
}
