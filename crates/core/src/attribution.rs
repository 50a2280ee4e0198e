//! Attribution: who last wrote a field of a live object.
//!
//! The answer comes from `metadata.managedFields`: the entry whose field set
//! covers the field most specifically (the field itself, then an owned
//! ancestor such as an atomic map, the deepest first) is its writer; among
//! equally specific entries (shared ownership under server-side apply) the
//! most recent wins. A field nobody owns — typically one that a writer
//! removed — has no writer.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::diff::{
    Diff, DiffError, FieldDiff, FieldPath, ManagedFieldsEntry, Operation, managed_fields,
};

/// A field manager that wrote a field: `kubectl-edit` through an Update,
/// `kubectl-scale` through the `scale` subresource, `kubectl` through a
/// server-side Apply, a controller by its name…
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Writer {
    pub manager: String,
    pub operation: Operation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// When the manager last wrote (RFC 3339, as the server recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}

impl From<&ManagedFieldsEntry> for Writer {
    fn from(entry: &ManagedFieldsEntry) -> Self {
        Writer {
            manager: entry.manager.clone(),
            operation: entry.operation,
            subresource: entry.subresource.clone(),
            time: entry.time.clone(),
        }
    }
}

/// The decoded field ownership of one live object.
#[derive(Debug, Clone)]
pub struct Ownership<'a> {
    live: &'a Value,
    entries: Vec<ManagedFieldsEntry>,
}

impl<'a> Ownership<'a> {
    /// Reads the ownership recorded in `live`'s `managedFields`.
    pub fn of(live: &'a Value) -> Result<Self, DiffError> {
        Ok(Ownership {
            live,
            entries: managed_fields(live)?,
        })
    }

    /// The last writer of the field at `path`, if any entry covers it.
    ///
    /// ```
    /// use serde_json::json;
    /// use tether_core::attribution::Ownership;
    /// use tether_core::diff::FieldPath;
    /// let live = json!({"spec": {"replicas": 5}, "metadata": {"managedFields": [
    ///     {"manager": "tether", "operation": "Apply", "fieldsV1": {"f:spec": {"f:template": {}}}},
    ///     {"manager": "kubectl-scale", "operation": "Update", "subresource": "scale",
    ///      "fieldsV1": {"f:spec": {"f:replicas": {}}}}]}});
    /// let writer = Ownership::of(&live).unwrap()
    ///     .writer_of(&FieldPath::fields(["spec", "replicas"])).unwrap();
    /// assert_eq!(writer.manager, "kubectl-scale");
    /// ```
    pub fn writer_of(&self, path: &FieldPath) -> Option<Writer> {
        self.entries
            .iter()
            .filter_map(|entry| {
                let coverage = entry.fields.coverage(self.live, path)?;
                Some(((coverage, entry.time.as_deref()), entry))
            })
            .max_by(|(a, _), (b, _)| a.cmp(b))
            .map(|(_, entry)| Writer::from(entry))
    }

    /// Each differing field of `diff` with its last writer.
    pub fn attribute<'d>(&self, diff: &'d Diff) -> Vec<(&'d FieldDiff, Option<Writer>)> {
        diff.fields
            .iter()
            .map(|field| (field, self.writer_of(&field.path)))
            .collect()
    }
}
