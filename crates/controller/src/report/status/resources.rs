//! Each object's status: sync, health and a one-line drift summary; the
//! app's health from its objects'; the other writers of its objects; the
//! names the API server generated; inventory entries.

use tether_core::SyncStatus;
use tether_core::attribution::{Ownership, other_writers};
use tether_core::drift::drifted_fields;
use tether_core::generated::{generate_name, key_of};
use tether_core::health::{Health, HealthStatus, app_health};

use crate::api::application::{
    GeneratedEntry, HealthInfo, InventoryEntry, OtherWriterEntry, ResourceStatus,
};
use crate::observe::compare::{Compared, ObjectState};
use crate::observe::health::Judge;

const DRIFT_FIELDS_SHOWN: usize = 5;
const OTHER_WRITERS_LIMIT: usize = 20;

pub(super) fn resource_status(compared: &Compared, judge: &Judge) -> ResourceStatus {
    let id = &compared.id;
    ResourceStatus {
        group: id.group.clone(),
        kind: id.kind.clone(),
        namespace: id.namespace.clone(),
        name: id.name.clone(),
        sync: if compared.in_sync() {
            SyncStatus::Synced
        } else {
            SyncStatus::OutOfSync
        },
        health: object_health(compared, judge).map(|health| HealthInfo {
            status: health.status,
            message: health.message,
        }),
        drift: drift_summary(compared),
    }
}

pub(super) fn object_health(compared: &Compared, judge: &Judge) -> Option<Health> {
    match &compared.live {
        Some(live) => judge.assess(live),
        None => Some(Health::new(
            HealthStatus::Missing,
            format!("{}: desired but absent", compared.id),
        )),
    }
}

/// The application's health from its resources' (as written in status).
pub(super) fn app_health_of(resources: &[ResourceStatus]) -> HealthInfo {
    let healths: Vec<Health> = resources
        .iter()
        .filter_map(|resource| resource.health.as_ref())
        .map(|health| Health::new(health.status, health.message.clone()))
        .collect();
    let health = app_health(&healths);
    HealthInfo {
        status: health.status,
        message: health.message,
    }
}

/// One line: the differing fields and who last wrote each.
fn drift_summary(compared: &Compared) -> Option<String> {
    match &compared.state {
        ObjectState::InSync => None,
        ObjectState::Missing => Some("missing".into()),
        ObjectState::Uncomparable(reason) => Some(format!("not compared: {reason}")),
        ObjectState::Differs(diff) => {
            let live = compared.live.as_ref()?;
            let ownership = Ownership::of(live).ok()?;
            let fields = drifted_fields(diff, &ownership);
            let mut parts: Vec<String> = fields
                .iter()
                .take(DRIFT_FIELDS_SHOWN)
                .map(|field| match &field.writer {
                    Some(writer) => format!("{} (by {})", field.path, writer.manager),
                    None => field.path.clone(),
                })
                .collect();
            if fields.len() > DRIFT_FIELDS_SHOWN {
                parts.push(format!("and {} more", fields.len() - DRIFT_FIELDS_SHOWN));
            }
            Some(parts.join(", "))
        }
    }
}

/// Every writer besides Tether of the live objects, most recent first.
/// An object whose managedFields cannot be read is already reported as
/// not compared.
pub(super) fn other_writers_of(compared: &[Compared]) -> Vec<OtherWriterEntry> {
    let mut entries: Vec<OtherWriterEntry> = compared
        .iter()
        .filter_map(|c| Some((c.id.to_string(), other_writers(c.live.as_ref()?).ok()?)))
        .flat_map(|(object, writers)| {
            writers.into_iter().map(move |writer| OtherWriterEntry {
                object: object.clone(),
                writer,
            })
        })
        .collect();
    entries.sort_by(|a, b| b.writer.writer.time.cmp(&a.writer.writer.time));
    entries.truncate(OTHER_WRITERS_LIMIT);
    entries
}

/// The objects among `compared` that the API server named, with the name
/// and UID each got; one whose live copy is not seen (yet, or any more)
/// keeps its `previous` record.
pub(super) fn generated_of(
    compared: &[Compared],
    previous: &[GeneratedEntry],
) -> Vec<GeneratedEntry> {
    compared
        .iter()
        .filter(|c| generate_name(&c.desired).is_none())
        .filter_map(|c| {
            let key = key_of(&c.desired)?;
            let generate_name = c.desired.pointer("/metadata/generateName")?.as_str()?;
            let entry = GeneratedEntry {
                group: c.id.group.clone(),
                kind: c.id.kind.clone(),
                namespace: c.id.namespace.clone(),
                generate_name: generate_name.to_string(),
                key: key.to_string(),
                name: c.id.name.clone(),
                uid: String::new(),
            };
            match c
                .live
                .as_ref()
                .and_then(|l| l.pointer("/metadata/uid")?.as_str())
            {
                Some(uid) => Some(GeneratedEntry {
                    uid: uid.to_string(),
                    ..entry
                }),
                None => previous
                    .iter()
                    .find(|p| {
                        GeneratedEntry {
                            uid: p.uid.clone(),
                            ..entry.clone()
                        } == **p
                    })
                    .cloned(),
            }
        })
        .collect()
}

pub(super) fn inventory_entry(compared: &Compared) -> InventoryEntry {
    let version = compared
        .desired
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or_default();
    InventoryEntry {
        group: compared.id.group.clone(),
        version: version.to_string(),
        kind: compared.id.kind.clone(),
        namespace: compared.id.namespace.clone(),
        name: compared.id.name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tether_core::ObjectRef;

    fn compared(name: &str, managed_fields: serde_json::Value) -> Compared {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop", "managedFields": managed_fields},
            "data": {"greeting": "hi", "mode": "fast"}});
        Compared {
            id: ObjectRef::from_object(&live).unwrap(),
            desired: live.clone(),
            live: Some(live),
            state: ObjectState::InSync,
        }
    }

    #[test]
    fn other_writers_of_every_object_are_listed_newest_first() {
        let tether = json!({"manager": "tether", "operation": "Apply",
            "fieldsV1": {"f:data": {"f:greeting": {}}}});
        let patch = json!({"manager": "kubectl-patch", "operation": "Update",
            "time": "2026-11-30T10:00:00Z", "fieldsV1": {"f:data": {"f:mode": {}}}});
        let edit = json!({"manager": "kubectl-edit", "operation": "Update",
            "time": "2026-11-30T11:00:00Z", "fieldsV1": {"f:data": {"f:mode": {}}}});
        let listed = other_writers_of(&[
            compared("a", json!([tether, patch])),
            compared("b", json!([tether, edit])),
            compared("c", json!([tether])),
        ]);
        let found: Vec<(&str, &str)> = listed
            .iter()
            .map(|e| (e.object.as_str(), e.writer.writer.manager.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("ConfigMap shop/b", "kubectl-edit"),
                ("ConfigMap shop/a", "kubectl-patch")
            ]
        );
        assert_eq!(listed[0].writer.paths, ["data.mode"]);
    }
}
