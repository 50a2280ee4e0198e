//! Objects the API server names (`generateName`; `tether_core::generated`
//! decides): before the comparison each is marked with the key of its
//! content and, once created, named as the object created for that key — as
//! status recorded it, or as the watch caches show it (created by a
//! reconcile that stopped before recording it) — so that it is compared,
//! health-checked and pruned like any named object. One not created yet
//! stays unnamed: it is Missing, and the sync creates it (once). After the
//! sync, [`created`] names in the comparison what the sync created.

use std::sync::Arc;

use serde_json::Value;
use tether_core::generated::{generate_name, key_of, mark, named, pick};
use tether_source::{Manifest, Rendered};

use super::Pass;
use crate::api::application::GeneratedEntry;
use crate::observe::compare::{Compared, ObjectState};
use crate::sync::Ran;

/// `desired` with every object the API server names marked with its key,
/// and named when it was created already.
pub async fn name(pass: &Pass<'_>, mut desired: Rendered) -> Rendered {
    if !desired
        .manifests
        .iter()
        .any(|m| generate_name(&m.object).is_some())
    {
        return desired;
    }
    let recorded = pass
        .app
        .status
        .as_ref()
        .map(|s| s.generated.as_slice())
        .unwrap_or_default();
    let mut manifests = Vec::clone(&desired.manifests);
    for manifest in &mut manifests {
        if generate_name(&manifest.object).is_none() {
            continue;
        }
        mark(&mut manifest.object);
        if let Some(name) = created_for(pass, manifest, recorded).await {
            named(&mut manifest.object, &name);
            manifest.id.name = name;
        }
    }
    desired.manifests = Arc::new(manifests);
    desired
}

/// The name of the object created for `manifest` (marked), if any.
async fn created_for(
    pass: &Pass<'_>,
    manifest: &Manifest,
    recorded: &[GeneratedEntry],
) -> Option<String> {
    let id = pass.applier.identify(&manifest.object).await.ok()?;
    let key = key_of(&manifest.object)?;
    let entry = recorded.iter().find(|entry| {
        entry.group == id.group
            && entry.kind == id.kind
            && entry.namespace == id.namespace
            && entry.generate_name == id.name
            && entry.key == key
    });
    if let Some(entry) = entry {
        return Some(entry.name.clone());
    }
    let target = &pass.target;
    let served = target.resources.resolve(&id, &manifest.object).await.ok()?;
    let label = pass.owner.label_value();
    let live: Vec<Value> = target
        .live
        .labelled_in(&served, id.namespace.as_deref(), &label)
        .await
        .iter()
        .filter_map(|object| serde_json::to_value(&**object).ok())
        .collect();
    let candidates: Vec<&Value> = live.iter().collect();
    let found = pick(&manifest.object, &candidates)?;
    Some(found.pointer("/metadata/name")?.as_str()?.to_string())
}

/// `compared` with each object the sync just created named as created:
/// in sync, with the live object the API server returned.
pub fn created(compared: Vec<Compared>, sync: Option<&Ran>) -> Vec<Compared> {
    let Some(Ok(report)) = sync.map(|ran| ran.result.as_ref()) else {
        return compared;
    };
    compared
        .into_iter()
        .map(|c| {
            if generate_name(&c.desired).is_none() {
                return c;
            }
            let made = report.applied.iter().find(|applied| {
                applied.id.group == c.id.group
                    && applied.id.kind == c.id.kind
                    && applied.id.namespace == c.id.namespace
                    && generate_name(&applied.sent).is_some()
                    && key_of(&applied.sent) == key_of(&c.desired)
            });
            let Some(made) = made else {
                return c;
            };
            let mut desired = c.desired;
            named(&mut desired, &made.id.name);
            Compared {
                id: made.id.clone(),
                desired,
                live: Some(made.live.clone()),
                state: ObjectState::InSync,
            }
        })
        .collect()
}
