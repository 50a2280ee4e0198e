//! Take-over from Argo CD or Flux: Argo CD's and Flux's field managers are
//! dropped from the objects the app adopted (`tether_core::import::takeover`
//! decides), so field ownership moves to Tether in place. A few requests
//! per such object, once; none in steady state (the objects are judged on
//! what the sync returned and the watch cache holds).

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;
use tether_cluster::ClusterError;
use tether_core::ObjectRef;
use tether_core::import::takeover::{release_patch, released_managers};
use tether_core::tracking::FIELD_MANAGER;

use super::Pass;
use crate::observe::compare::Compared;
use crate::sync::Ran;

/// Attempts per object when its resourceVersion moves under the patch.
const ATTEMPTS: usize = 3;

/// Why an object's field managers were not released; logged with the
/// object's name.
#[derive(Debug, thiserror::Error)]
enum ReleaseError {
    #[error(transparent)]
    Resolve(#[from] ClusterError),
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("reading it back: {0}")]
    Read(#[from] serde_json::Error),
    #[error("it kept changing ({ATTEMPTS} attempts)")]
    KeptChanging,
}

/// Drops Argo CD's and Flux's field managers from the adopted objects that
/// still have them, as `sync` returned them or the cache holds them. A
/// failure is logged and tried again at the next pass.
pub async fn release(pass: &Pass<'_>, compared: &[Compared], sync: Option<&Ran>) {
    let applied = match sync.map(|ran| &ran.result) {
        Some(Ok(report)) => report.applied.as_slice(),
        _ => &[],
    };
    let mut candidates: Vec<(&ObjectRef, &Value)> = applied
        .iter()
        .map(|applied| (&applied.id, &applied.live))
        .collect();
    for c in compared {
        if let Some(live) = &c.live
            && !candidates.iter().any(|(id, _)| *id == &c.id)
        {
            candidates.push((&c.id, live));
        }
    }
    for (id, live) in candidates {
        if release_patch(live).is_none() {
            continue;
        }
        let released = released_managers(live).join(", ");
        match release_one(pass, id, live).await {
            Ok(()) => tracing::info!(object = %id, %released, "took over field ownership"),
            Err(error) => {
                tracing::warn!(object = %id, %released, %error, "releasing field managers failed")
            }
        }
    }
}

/// Patches `id`'s managedFields, reading it again when it moved meanwhile.
async fn release_one(pass: &Pass<'_>, id: &ObjectRef, live: &Value) -> Result<(), ReleaseError> {
    let api: Api<DynamicObject> = pass.applier.api_for(id, live).await?;
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PatchParams::default()
    };
    let mut current = live.clone();
    for _ in 0..ATTEMPTS {
        let Some(patch) = release_patch(&current) else {
            return Ok(());
        };
        match api.patch(&id.name, &params, &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                current = serde_json::to_value(api.get(&id.name).await?)?;
            }
            Err(error) => return Err(error.into()),
        }
    }
    Err(ReleaseError::KeptChanging)
}
