//! How `status.inventory` is stored: objects grouped by group, version,
//! kind and namespace, each group listing its names.
//!
//! An inventory of 20,000 objects as one entry per object is about 1.7 MB,
//! over what etcd stores in one object; grouped it is about 15 bytes a
//! name. In memory the inventory stays one [`InventoryEntry`] per object.
//! Entries written one per object (by earlier versions) are still read.

use std::collections::BTreeMap;

use schemars::{Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use schemars::JsonSchema;
use tether_core::ObjectRef;

/// One object Tether applied for this app.
#[derive(
    Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct InventoryEntry {
    #[serde(default)]
    pub group: String,
    pub version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl InventoryEntry {
    /// The object this entry records.
    pub fn id(&self) -> ObjectRef {
        ObjectRef {
            group: self.group.clone(),
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// One stored group: a group-version-kind in one namespace, and names.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    group: String,
    version: String,
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    names: Vec<String>,
    /// One object, as entries were written before grouping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

type Key = (String, String, String, Option<String>);

pub(crate) fn serialize<S: Serializer>(
    inventory: &[InventoryEntry],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut groups: BTreeMap<Key, Vec<String>> = BTreeMap::new();
    for entry in inventory {
        let key = (
            entry.group.clone(),
            entry.version.clone(),
            entry.kind.clone(),
            entry.namespace.clone(),
        );
        groups.entry(key).or_default().push(entry.name.clone());
    }
    let stored: Vec<Stored> = groups
        .into_iter()
        .map(|((group, version, kind, namespace), mut names)| {
            names.sort();
            names.dedup();
            Stored {
                group,
                version,
                kind,
                namespace,
                names,
                name: None,
            }
        })
        .collect();
    stored.serialize(serializer)
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<InventoryEntry>, D::Error> {
    let stored = Vec::<Stored>::deserialize(deserializer)?;
    // Exactly as many as there are: every Application holds its inventory
    // for as long as it lives.
    let entries = stored
        .iter()
        .map(|group| group.names.len() + usize::from(group.name.is_some()))
        .sum();
    let mut inventory = Vec::with_capacity(entries);
    for group in stored {
        for name in group.names.iter().chain(group.name.iter()) {
            inventory.push(InventoryEntry {
                group: group.group.clone(),
                version: group.version.clone(),
                kind: group.kind.clone(),
                namespace: group.namespace.clone(),
                name: name.clone(),
            });
        }
    }
    Ok(inventory)
}

pub(crate) fn schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "Every object Tether applied for this app (prune's source of truth), \
                        grouped by group, version, kind and namespace.",
        "items": {
            "type": "object",
            "required": ["version", "kind"],
            "properties": {
                "group": {"type": "string"},
                "version": {"type": "string"},
                "kind": {"type": "string"},
                "namespace": {"type": "string"},
                "names": {"type": "array", "items": {"type": "string"}},
                "name": {"type": "string"}
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::api::ApplicationStatus;

    #[test]
    fn the_inventory_is_stored_grouped_and_read_back_one_entry_per_object() {
        let status: ApplicationStatus = serde_json::from_value(json!({"inventory": [
            {"version": "v1", "kind": "ConfigMap", "namespace": "shop", "names": ["a", "b"]},
            {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "shop", "name": "web"},
        ]}))
        .unwrap();
        let names: Vec<&str> = status.inventory.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "web"]);
        let stored = serde_json::to_value(&status).unwrap();
        assert_eq!(
            stored["inventory"],
            json!([
                {"version": "v1", "kind": "ConfigMap", "namespace": "shop", "names": ["a", "b"]},
                {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": "shop",
                 "names": ["web"]},
            ])
        );
    }

    #[test]
    fn twenty_thousand_objects_fit_in_one_status() {
        let inventory = (0..20_000)
            .map(|i| super::InventoryEntry {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("shop".into()),
                name: format!("config-{i:05}"),
            })
            .collect();
        let status = ApplicationStatus {
            inventory,
            ..Default::default()
        };
        let bytes = serde_json::to_vec(&status).unwrap().len();
        assert!(bytes < 400_000, "{bytes} bytes");
    }
}
