//! Fetch under a rollback's pin (`spec.pin`): the pinned revision is
//! rendered instead of the branch head; the head is rendered too (the
//! render cache makes that cheap) so `tether_core::rollback::judge_pin`
//! can say whether Git caught up, in which case the pin is removed from
//! the spec and the head is the desired state again.

use kube::ResourceExt;
use tether_core::rollback::{PinVerdict, Rendition, judge_pin};
use tether_source::Rendered;

use super::Pass;
use super::fetch::{self, FetchError};
use crate::api::pin::{Pin, PinState};
use crate::request;

/// The desired state: at the pinned revision while a pin holds, else at
/// the source's own revision (or a pending `tether sync --revision`).
pub async fn desired(pass: &Pass<'_>) -> Result<Rendered, FetchError> {
    let Some(pin) = pass.app.spec.pin.clone() else {
        let _ = pass.pin.set(None);
        return fetch::desired(pass, request::requested_revision(&pass.app)).await;
    };
    // Render the branch head and the pinned revision, from one fetch.
    let mut both = fetch::desired_at(pass, &[None, Some(&pin.revision)]).await?;
    let (pinned, head) = (
        both.pop().expect("two renders"),
        both.pop().expect("two renders"),
    );
    let verdict = judge_pin(rendition(&head), rendition(&pinned));
    let _ = pass.pin.set(Some(PinState {
        pin: pin.clone(),
        head: head.commit.clone(),
        verdict,
    }));
    match verdict {
        PinVerdict::Hold => Ok(pinned),
        PinVerdict::GitMatches => {
            lift(pass, &pin).await;
            Ok(head)
        }
    }
}

fn rendition(rendered: &Rendered) -> Rendition<'_> {
    Rendition {
        commit: &rendered.commit,
        tree: &rendered.tree,
        digest: &rendered.digest,
    }
}

/// Removes `pin` from the spec, only if it is still the pin there (a newer
/// rollback made meanwhile stays). A failure is logged: the next
/// reconcile judges the pin again.
async fn lift(pass: &Pass<'_>, pin: &Pin) {
    let app = &pass.app;
    let patch: json_patch::Patch = match serde_json::from_value(serde_json::json!([
        {"op": "test", "path": "/spec/pin/revision", "value": pin.revision},
        {"op": "test", "path": "/spec/pin/since", "value": pin.since},
        {"op": "remove", "path": "/spec/pin"},
    ])) {
        Ok(patch) => patch,
        Err(error) => {
            tracing::warn!(app = %app.name_any(), %error, "building the pin-lifting patch failed");
            return;
        }
    };
    match crate::guarded::patch(&pass.ctx.client, app, patch).await {
        Ok(true) => tracing::info!(
            app = %app.name_any(),
            revision = %pin.revision,
            "the branch head renders the pinned state: pin lifted (GitMatches)"
        ),
        Ok(false) => {
            tracing::debug!(app = %app.name_any(), "the pin changed meanwhile; kept");
        }
        Err(error) => {
            tracing::warn!(app = %app.name_any(), %error, "lifting the pin failed");
        }
    }
}
