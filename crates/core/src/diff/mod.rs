//! Diff: which fields of a live object differ from desired state.
//!
//! Tether decides drift with server-side-apply semantics. The desired side
//! is what the API server says live *would* be after Tether's apply: the
//! result of a server-side dry-run apply, with defaults and admission
//! mutations filled in. Comparing that with live, after [`normalize`] has
//! removed what the server owns, means server defaults are never drift and
//! fields other writers added that Git does not mention are never drift
//! (the dry-run keeps them, so both sides have them). See [`diff`].
//!
//! When no dry-run is possible, [`diff_manifest`] compares the manifest
//! itself, restricted to the fields it sets, plus the fields Tether owns in
//! live that the manifest dropped.
//!
//! Every output masks Secret values, as the caller's [`SecretMask`] says
//! (see [`secret`]).

mod compare;
mod lists;
mod managed;
mod normalize;
mod path;
pub mod secret;

use serde::Serialize;
use serde_json::Value;

use crate::object::ObjectRef;
use compare::{Mode, Walk};

pub use lists::LIST_KEYS;
pub use managed::{
    Coverage, FieldSet, ManagedFieldsEntry, Operation, managed_fields, owned_fields,
};
pub use normalize::{IgnoreRule, JsonPointer, SERVER_ANNOTATIONS, SERVER_METADATA, normalize};
pub use path::{FieldPath, Segment};
pub use secret::SecretMask;

/// Why a comparison could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiffError {
    #[error("metadata.managedFields: {0}")]
    BadManagedFields(String),
    #[error("metadata.managedFields: fieldsV1 {0}")]
    BadFieldsV1(String),
    #[error("ignoreDifferences: JSON pointer {pointer:?} {why}")]
    BadPointer { pointer: String, why: &'static str },
}

/// The differences between desired and live state of one object.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Diff {
    /// One entry per differing field, in the object's order (mapping
    /// keys sorted).
    pub fields: Vec<FieldDiff>,
}

impl Diff {
    /// Whether live matches desired state.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// One differing field: its desired value and its live value (`None` where
/// that side does not have it). Secret values are masked.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldDiff {
    pub path: FieldPath,
    pub desired: Option<Value>,
    pub live: Option<Value>,
}

/// Compares `desired` — the object a server-side dry-run apply returned —
/// with `live`, ignoring server-owned fields and the fields `ignore` names.
///
/// ```
/// use serde_json::json;
/// use tether_core::diff::{SecretMask, diff};
/// let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
///     "metadata": {"name": "a", "resourceVersion": "7"}, "data": {"mode": "slow"}});
/// let desired = json!({"apiVersion": "v1", "kind": "ConfigMap",
///     "metadata": {"name": "a", "resourceVersion": "7"}, "data": {"mode": "fast"}});
/// let diff = diff(&desired, &live, &[], SecretMask::Hidden).unwrap();
/// assert_eq!(diff.fields[0].path.to_string(), "data.mode");
/// ```
pub fn diff(
    desired: &Value,
    live: &Value,
    ignore: &[IgnoreRule],
    mask: SecretMask<'_>,
) -> Result<Diff, DiffError> {
    compare(desired, live, ignore, Mode::Full, None, mask)
}

/// Compares a `manifest` (as Git has it, not dry-run) with `live`, counting
/// only the fields the manifest sets and the fields of live that `manager`
/// applied (server-side apply) but the manifest no longer sets. `metadata.namespace` is identity,
/// not state: the caller paired the two objects, and the server drops a
/// namespace given to a cluster-scoped kind.
pub fn diff_manifest(
    manifest: &Value,
    live: &Value,
    ignore: &[IgnoreRule],
    manager: &str,
    mask: SecretMask<'_>,
) -> Result<Diff, DiffError> {
    compare(manifest, live, ignore, Mode::Manifest, Some(manager), mask)
}

/// `manifest` with each value it sets replaced by the server's version of
/// it in `predicted` (an earlier dry-run of the same manifest), so values
/// the server normalizes (quantities, list items it completes) compare as
/// the server stores them. Fields the manifest does not set stay absent;
/// a list whose length changed keeps the manifest's items.
///
/// ```
/// use serde_json::json;
/// use tether_core::diff::as_predicted;
/// let manifest = json!({"spec": {"cpu": "1000m"}});
/// let predicted = json!({"spec": {"cpu": "1", "defaulted": true}});
/// assert_eq!(as_predicted(&manifest, &predicted), json!({"spec": {"cpu": "1"}}));
/// ```
pub fn as_predicted(manifest: &Value, predicted: &Value) -> Value {
    match (manifest, predicted) {
        (Value::Object(wanted), Value::Object(server)) => Value::Object(
            wanted
                .iter()
                .map(|(key, value)| {
                    let value = match server.get(key) {
                        Some(server) => as_predicted(value, server),
                        None => value.clone(),
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        (Value::Array(wanted), Value::Array(server)) if wanted.len() == server.len() => {
            Value::Array(
                wanted
                    .iter()
                    .zip(server)
                    .map(|(value, server)| as_predicted(value, server))
                    .collect(),
            )
        }
        (Value::Object(_) | Value::Array(_), _) => manifest.clone(),
        (_, Value::Object(_) | Value::Array(_)) => manifest.clone(),
        (_, server) => server.clone(),
    }
}

fn compare(
    desired: &Value,
    live: &Value,
    ignore: &[IgnoreRule],
    mode: Mode,
    manager: Option<&str>,
    mask: SecretMask<'_>,
) -> Result<Diff, DiffError> {
    let rules: Vec<&IgnoreRule> =
        match ObjectRef::from_object(desired).or_else(|_| ObjectRef::from_object(live)) {
            Ok(id) => ignore.iter().filter(|rule| rule.matches(&id)).collect(),
            Err(_) => Vec::new(),
        };
    let entries = managed_fields(live)?;
    let (mut desired, mut normalized_live) = (normalize(desired), normalize(live));
    for side in [&mut desired, &mut normalized_live] {
        if mode == Mode::Manifest
            && let Some(Value::Object(metadata)) = side.get_mut("metadata")
        {
            metadata.remove("namespace");
        }
        for pointer in rules.iter().flat_map(|rule| &rule.json_pointers) {
            normalize::remove_pointer(side, pointer);
        }
    }
    // Only what the manager *applied* is removed when a manifest drops it;
    // an Update entry also owns the defaults the server filled in.
    let applied: Vec<ManagedFieldsEntry> = entries
        .iter()
        .filter(|entry| entry.operation == Operation::Apply)
        .cloned()
        .collect();
    let owned = manager.map(|manager| managed::manager_set(&applied, manager));
    let mut walk = Walk {
        mode,
        out: Vec::new(),
    };
    walk.compare(
        Some(&desired),
        Some(&normalized_live),
        owned.as_ref(),
        &FieldPath::root(),
        None,
    );
    let ignored_managers: Vec<&str> = rules
        .iter()
        .flat_map(|rule| &rule.managed_fields_managers)
        .map(String::as_str)
        .collect();
    let ignored = ignored_managers
        .iter()
        .fold(FieldSet::default(), |set, manager| {
            set.union(&managed::manager_set(&entries, manager))
        });
    let secret = desired
        .as_object()
        .or(normalized_live.as_object())
        .is_some_and(normalize::is_secret);
    let mut fields: Vec<FieldDiff> = walk
        .out
        .into_iter()
        .filter(|field| !ignored.covers(live, &field.path))
        .collect();
    if secret {
        fields
            .iter_mut()
            .for_each(|field| secret::mask_field(field, mask));
    }
    Ok(Diff { fields })
}
