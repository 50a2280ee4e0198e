//! Attribution: who last wrote a field of a live object.
//!
//! The answer comes from `metadata.managedFields`: the entry whose field set
//! covers the field most specifically (the field itself, then an owned
//! ancestor such as an atomic map, the deepest first) is its writer; among
//! equally specific entries (shared ownership under server-side apply) the
//! most recent wins. A field nobody owns — typically one that a writer
//! removed — has no writer.
//!
//! [`other_writers`] answers the converse question for the "the controller
//! is the only writer" rule: who besides Tether still owns fields of a
//! managed object.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::diff::{
    Diff, DiffError, FieldDiff, FieldPath, ManagedFieldsEntry, Operation, Segment, managed_fields,
};
use crate::tracking::FIELD_MANAGER;

/// A field manager that wrote a field: `kubectl-edit` through an Update,
/// `kubectl-scale` through the `scale` subresource, `kubectl` through a
/// server-side Apply, a controller by its name…
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Writer {
    pub manager: String,
    pub operation: Operation,
    pub subresource: Option<String>,
    /// When the manager last wrote (RFC 3339, as the server recorded it).
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

/// A field manager other than Tether that owns fields of a live object,
/// beyond its status and what Kubernetes itself keeps in its metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OtherWriter {
    #[serde(flatten)]
    pub writer: Writer,
    /// How many fields it owns.
    pub fields: usize,
    /// The first of them (at most [`PATHS_SHOWN`]), e.g. `spec.replicas`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
}

/// How many owned field paths an [`OtherWriter`] names.
pub const PATHS_SHOWN: usize = 3;

/// Label and annotation key prefixes that Kubernetes' own controllers and
/// the API server write (`deployment.kubernetes.io/revision`,
/// `kubernetes.io/metadata.name`, …). `app.kubernetes.io/` is not among
/// them: those are the user's labels.
pub const KUBERNETES_KEY_PREFIXES: &[&str] = &[
    "kubernetes.io/",
    "deployment.kubernetes.io/",
    "endpoints.kubernetes.io/",
    "endpointslice.kubernetes.io/",
    "control-plane.alpha.kubernetes.io/",
    "pv.kubernetes.io/",
    "volume.kubernetes.io/",
    "volume.beta.kubernetes.io/",
    "batch.kubernetes.io/",
    "autoscaling.alpha.kubernetes.io/",
];

/// Every field manager other than Tether (`tether`) that owns fields of
/// `live`, most recent first (then by name).
///
/// Writes through the `status` subresource do not count (controllers
/// report there), nor do fields that are not the object's content:
/// `status`, and in `metadata` everything but labels and annotations, and
/// the labels and annotations Kubernetes maintains
/// ([`KUBERNETES_KEY_PREFIXES`]). A manager whose fields were all taken
/// back — a reverted `kubectl edit` — owns nothing and is not listed.
///
/// ```
/// use serde_json::json;
/// use tether_core::attribution::other_writers;
/// let live = json!({"spec": {"replicas": 5}, "metadata": {"managedFields": [
///     {"manager": "tether", "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
///     {"manager": "kubectl", "operation": "Update", "subresource": "scale",
///      "time": "2025-01-01T00:00:00Z", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]}});
/// let writers = other_writers(&live).unwrap();
/// assert_eq!(writers[0].writer.manager, "kubectl");
/// assert_eq!(writers[0].paths, ["spec.replicas"]);
/// ```
pub fn other_writers(live: &Value) -> Result<Vec<OtherWriter>, DiffError> {
    let mut writers: Vec<OtherWriter> = managed_fields(live)?
        .iter()
        .filter(|entry| entry.manager != FIELD_MANAGER)
        .filter(|entry| entry.subresource.as_deref() != Some("status"))
        .filter_map(|entry| {
            let paths: Vec<FieldPath> = entry
                .fields
                .paths_in(live)
                .into_iter()
                .filter(|path| !is_kept_by_kubernetes(path))
                .collect();
            (!paths.is_empty()).then(|| OtherWriter {
                writer: Writer::from(entry),
                fields: paths.len(),
                paths: paths
                    .iter()
                    .take(PATHS_SHOWN)
                    .map(ToString::to_string)
                    .collect(),
            })
        })
        .collect();
    writers.sort_by(|a, b| {
        b.writer
            .time
            .cmp(&a.writer.time)
            .then_with(|| a.writer.manager.cmp(&b.writer.manager))
    });
    Ok(writers)
}

/// Whether the field at `path` is bookkeeping rather than content: status,
/// and metadata other than the user's labels and annotations.
fn is_kept_by_kubernetes(path: &FieldPath) -> bool {
    let field = |n: usize| match path.segments().get(n) {
        Some(Segment::Field(name)) => Some(name.as_str()),
        _ => None,
    };
    match (field(0), field(1), field(2)) {
        (Some("status"), ..) => true,
        (Some("metadata"), Some("labels" | "annotations"), Some(key)) => KUBERNETES_KEY_PREFIXES
            .iter()
            .any(|prefix| key.starts_with(prefix)),
        (Some("metadata"), Some("labels" | "annotations"), None) => false,
        (Some("metadata"), ..) => true,
        _ => false,
    }
}
