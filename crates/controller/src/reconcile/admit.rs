//! Admission of a commit's objects (decided by `tether_core::ownership`):
//! the namespaces the destination allows, before anything is read; the
//! objects other apps hold or nobody gave this app, after the comparison.
//! A refusal refuses the whole commit.

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};
use tether_cluster::Applier;
use tether_core::ObjectRef;
use tether_core::ownership::{self, Admitted, Candidate, Refusal, mark_adopted};
use tether_core::tracking::AppRef;
use tether_source::{Manifest, Rendered};

use super::Pass;
use crate::api::Application;
use crate::api::StoredApplication;
use crate::clusters::Target;
use crate::context::Context;
use crate::observe::compare::Compared;

/// Why a commit was refused: every object at fault, each with its reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct Refused(pub Vec<Refusal>);

/// Refuses namespaced objects outside the app's destination (and the
/// namespaces it allows), before any of them is read or dry-run.
pub async fn destination(
    applier: &Applier,
    app: &Application,
    manifests: &[Manifest],
) -> Result<(), Refused> {
    let destination = &app.spec.destination;
    let mut refused = Vec::new();
    for manifest in manifests {
        let id = super::identify(applier, manifest).await;
        let namespace = id.namespace.as_deref();
        if !ownership::namespace_allowed(
            namespace,
            &destination.namespace,
            &destination.allow_namespaces,
        ) {
            refused.push(Refusal::Namespace { object: id });
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(Refused(refused))
    }
}

/// Admits the compared objects of `app`: those another app holds must have
/// been released by it, those nobody created need the app's opt-in.
pub async fn ownership(pass: &Pass<'_>, compared: &[Compared]) -> Result<Admitted, Refused> {
    let (ctx, app, owner) = (pass.ctx, &pass.app, &pass.owner);
    let inventory = app.inventory();
    // The watch caches hold only objects labelled as Tether's: one they
    // miss may still exist, made by hand or by another tool.
    let mut unlabelled = Vec::with_capacity(compared.len());
    let mut unreadable = Vec::new();
    for c in compared {
        unlabelled.push(match c.live {
            Some(_) => None,
            None => existing(&pass.target, c).await.unwrap_or_else(|reason| {
                unreadable.push(Refusal::Unreadable {
                    object: c.id.clone(),
                    reason,
                });
                None
            }),
        });
    }
    if !unreadable.is_empty() {
        return Err(Refused(unreadable));
    }
    let candidates: Vec<Candidate<'_>> = compared
        .iter()
        .zip(&unlabelled)
        .map(|(c, found)| Candidate {
            id: &c.id,
            desired: &c.desired,
            live: c.live.as_ref().or(found.as_ref()),
            in_inventory: inventory.iter().any(|entry| entry.id() == c.id),
            namespace_allowed: true,
        })
        .collect();
    // Ask each other app once whether it still declares what it holds.
    let mut others: HashMap<AppRef, Other> = HashMap::new();
    for candidate in &candidates {
        if let ownership::Holder::OtherApp(other) =
            ownership::holder(owner, candidate.live, candidate.in_inventory)
            && !others.contains_key(&other)
        {
            let found = other_app(ctx, &other).await;
            others.insert(other, found);
        }
    }
    let released = |other: &AppRef, id: &ObjectRef| match others.get(other) {
        Some(Other::Gone) => true,
        Some(Other::Found(app)) => !declares(app, id),
        Some(Other::Unreadable) | None => false,
    };
    ownership::admit(
        owner,
        &candidates,
        app.spec.sync_policy.adopt_existing,
        released,
    )
    .map_err(Refused)
}

/// The metadata of an object the watch caches do not have, if it exists
/// (one request; only for objects about to be created, and not for one the
/// API server will name). A kind not served
/// yet has no objects.
async fn existing(target: &Target, compared: &Compared) -> Result<Option<Value>, String> {
    // An object the API server will name cannot exist yet.
    if tether_core::generated::generate_name(&compared.desired).is_some() {
        return Ok(None);
    }
    let Ok(served) = target
        .resources
        .resolve(&compared.id, &compared.desired)
        .await
    else {
        return Ok(None);
    };
    let api: Api<DynamicObject> = match &compared.id.namespace {
        Some(namespace) if served.namespaced => {
            Api::namespaced_with(target.client().clone(), namespace, &served.resource)
        }
        _ => Api::all_with(target.client().clone(), &served.resource),
    };
    let found = api
        .get_metadata_opt(&compared.id.name)
        .await
        .map_err(|error| error.to_string())?;
    Ok(found.map(|found| json!({"metadata": found.metadata})))
}

/// What another Application holding an object is.
enum Other {
    /// It does not exist: whatever it held is free (an app renamed).
    Gone,
    Found(Arc<Application>),
    /// It cannot be read, or does not decode: it holds on to everything.
    Unreadable,
}

async fn other_app(ctx: &Context, other: &AppRef) -> Other {
    let api: Api<StoredApplication> = Api::namespaced(ctx.client.clone(), &other.namespace);
    match api.get_opt(&other.name).await {
        Ok(None) => Other::Gone,
        Ok(Some(stored)) => match stored.decoded {
            Ok(app) => Other::Found(app),
            Err(_) => Other::Unreadable,
        },
        Err(error) => {
            tracing::warn!(%error, app = %other.name, "reading another Application failed");
            Other::Unreadable
        }
    }
}

/// Whether `app` still declares `id`: in its inventory and not an orphan.
fn declares(app: &Application, id: &ObjectRef) -> bool {
    let Some(status) = &app.status else {
        return false;
    };
    let shown = id.to_string();
    status.inventory.iter().any(|entry| entry.id() == *id)
        && !status.orphans.iter().any(|orphan| orphan.object == shown)
}

/// `desired` with the adopted objects marked, so every apply keeps the
/// mark (and prune knows Tether did not create them).
pub fn marked(mut desired: Rendered, compared: &[Compared], admitted: &Admitted) -> Rendered {
    if !admitted.adopted.is_empty() {
        desired.manifests = Arc::new(mark(&desired.manifests, compared, admitted));
    }
    desired
}

fn mark(manifests: &[Manifest], compared: &[Compared], admitted: &Admitted) -> Vec<Manifest> {
    manifests
        .iter()
        .map(|manifest| {
            let adopted = compared
                .iter()
                .any(|c| c.desired_matches(manifest) && admitted.adopted.contains(&c.id));
            let mut manifest = manifest.clone();
            if adopted {
                mark_adopted(&mut manifest.object);
            }
            manifest
        })
        .collect()
}
