//! Field ownership: decoding `metadata.managedFields`.
//!
//! Server-side apply records, per field manager, the set of fields it owns as
//! a `fieldsV1` tree. Keys name one step each: `f:name` a mapping key,
//! `k:{"name":"app"}` an element of an associative list by its key fields,
//! `v:"value"` an element of a set by value, `i:3` a list element by
//! position; `.` marks the element itself as owned, and an empty mapping is
//! an owned leaf. This module decodes that tree into a [`FieldSet`] and
//! realises it against a live object as [`FieldPath`]s.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::DiffError;
use super::lists::scalars_equal;
use super::path::{FieldPath, Segment};

/// How a field manager last wrote: `Apply` (server-side apply) or `Update`
/// (create, replace, patch, edit, scale, client-side apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Operation {
    Apply,
    Update,
}

/// One entry of `metadata.managedFields`.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedFieldsEntry {
    pub manager: String,
    pub operation: Operation,
    /// `status`, `scale`, … when written through a subresource.
    pub subresource: Option<String>,
    /// When the manager last changed its set (RFC 3339, as the server wrote it).
    pub time: Option<String>,
    pub fields: FieldSet,
}

/// How much of one field a [`FieldSet`] owns; a larger value is more
/// specific.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Coverage {
    /// An ancestor `depth` steps from the root is owned whole (an atomic
    /// mapping or list, or a list element).
    Ancestor(usize),
    /// Only fields below it are owned.
    Descendants,
    /// The field itself is owned.
    Exact,
}

/// One step of a `fieldsV1` tree.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Key(Map<String, Value>),
    Value(Value),
    Index(usize),
}

/// A decoded `fieldsV1` tree: which fields one manager owns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSet {
    member: bool,
    children: Vec<(Step, FieldSet)>,
}

impl FieldSet {
    /// Decodes a `fieldsV1` value.
    pub fn from_fields_v1(fields_v1: &Value) -> Result<FieldSet, DiffError> {
        // The root is the object itself, never a field anyone owns.
        let mut set = FieldSet::decode(fields_v1)?;
        set.member = false;
        Ok(set)
    }

    fn decode(fields_v1: &Value) -> Result<FieldSet, DiffError> {
        let map = fields_v1
            .as_object()
            .ok_or_else(|| DiffError::BadFieldsV1(format!("not a mapping: {fields_v1}")))?;
        let mut set = FieldSet {
            member: map.is_empty(),
            children: Vec::new(),
        };
        for (key, child) in map {
            if key == "." {
                set.member = true;
                continue;
            }
            set.children
                .push((decode_step(key)?, FieldSet::decode(child)?));
        }
        Ok(set)
    }

    /// Whether this node itself is owned (not just something below it).
    pub fn is_member(&self) -> bool {
        self.member
    }

    /// The node for mapping key `name`, if anything at or below it is owned.
    pub fn field(&self, name: &str) -> Option<&FieldSet> {
        self.children.iter().find_map(|(step, child)| match step {
            Step::Field(field) if field == name => Some(child),
            _ => None,
        })
    }

    /// The node for list element `element`, found at `index` in its list.
    pub fn element(&self, element: &Value, index: usize) -> Option<&FieldSet> {
        self.children
            .iter()
            .find(|(step, _)| step_matches(step, element, index))
            .map(|(_, child)| child)
    }

    /// How much of the field at `path` in `live` this set owns, if any.
    pub fn coverage(&self, live: &Value, path: &FieldPath) -> Option<Coverage> {
        let mut node = self;
        let mut value = Some(live);
        let mut deepest = None;
        for (depth, segment) in path.segments().iter().enumerate() {
            let (child, next) = match segment {
                Segment::Field(name) => (node.field(name), value.and_then(|v| v.get(name))),
                Segment::Keyed { index, .. }
                | Segment::Value { index, .. }
                | Segment::Index(index) => {
                    let item = value.and_then(|v| v.get(*index));
                    (item.and_then(|item| node.element(item, *index)), item)
                }
            };
            let Some(child) = child else {
                return deepest.map(Coverage::Ancestor);
            };
            node = child;
            value = next;
            if node.member {
                deepest = Some(depth + 1);
            }
        }
        if node.member {
            Some(Coverage::Exact)
        } else if !node.children.is_empty() {
            Some(Coverage::Descendants)
        } else {
            deepest.map(Coverage::Ancestor)
        }
    }

    /// Whether this set owns the field at `path` in `live`, itself or as
    /// part of an owned (atomic) ancestor.
    pub fn covers(&self, live: &Value, path: &FieldPath) -> bool {
        matches!(
            self.coverage(live, path),
            Some(Coverage::Exact | Coverage::Ancestor(_))
        )
    }

    /// Every owned field, as paths into `live`. Owned elements that `live`
    /// no longer has are left out: they are not fields of this object.
    pub fn paths_in(&self, live: &Value) -> Vec<FieldPath> {
        let mut out = Vec::new();
        self.collect(live, &FieldPath::root(), &mut out);
        out
    }

    fn collect(&self, live: &Value, path: &FieldPath, out: &mut Vec<FieldPath>) {
        if self.member && !path.segments().is_empty() {
            out.push(path.clone());
        }
        for (step, child) in &self.children {
            match (step, live) {
                (Step::Field(name), Value::Object(map)) => {
                    if let Some(value) = map.get(name) {
                        child.collect(value, &path.field(name), out);
                    }
                }
                (Step::Field(_), _) => {}
                (step, Value::Array(items)) => {
                    let found = items
                        .iter()
                        .enumerate()
                        .find(|(index, item)| step_matches(step, item, *index));
                    if let Some((index, item)) = found {
                        let segment = match step {
                            Step::Key(keys) => Segment::Keyed {
                                keys: keys.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                                index,
                            },
                            Step::Value(value) => Segment::Value {
                                value: value.clone(),
                                index,
                            },
                            _ => Segment::Index(index),
                        };
                        child.collect(item, &path.child(segment), out);
                    }
                }
                _ => {}
            }
        }
    }

    /// The union of two sets: fields owned by either.
    pub fn union(mut self, other: &FieldSet) -> FieldSet {
        self.member |= other.member;
        for (step, theirs) in &other.children {
            match self.children.iter().position(|(mine, _)| mine == step) {
                Some(at) => {
                    let mine = std::mem::take(&mut self.children[at].1);
                    self.children[at].1 = mine.union(theirs);
                }
                None => self.children.push((step.clone(), theirs.clone())),
            }
        }
        self
    }
}

fn step_matches(step: &Step, element: &Value, index: usize) -> bool {
    match step {
        Step::Key(keys) => keys.iter().all(|(key, value)| {
            element
                .get(key)
                .is_some_and(|found| scalars_equal(found, value, false))
        }),
        Step::Value(value) => scalars_equal(element, value, false),
        Step::Index(position) => *position == index,
        Step::Field(_) => false,
    }
}

fn decode_step(key: &str) -> Result<Step, DiffError> {
    let bad = |why: &str| DiffError::BadFieldsV1(format!("key {key:?}: {why}"));
    let (prefix, rest) = key.split_at_checked(2).ok_or_else(|| bad("too short"))?;
    match prefix {
        "f:" => Ok(Step::Field(rest.to_string())),
        "k:" => match serde_json::from_str(rest) {
            Ok(Value::Object(keys)) => Ok(Step::Key(keys)),
            _ => Err(bad("k: must be followed by a JSON object")),
        },
        "v:" => serde_json::from_str(rest)
            .map(Step::Value)
            .map_err(|_| bad("v: must be followed by a JSON value")),
        "i:" => rest
            .parse()
            .map(Step::Index)
            .map_err(|_| bad("i: must be followed by an index")),
        _ => Err(bad("unknown prefix (expected f:, k:, v: or i:)")),
    }
}

/// The decoded `metadata.managedFields` of `object` (empty if it has none).
pub fn managed_fields(object: &Value) -> Result<Vec<ManagedFieldsEntry>, DiffError> {
    let Some(entries) = object.pointer("/metadata/managedFields") else {
        return Ok(Vec::new());
    };
    let entries = entries
        .as_array()
        .ok_or_else(|| DiffError::BadManagedFields("not a list".into()))?;
    entries.iter().map(decode_entry).collect()
}

fn decode_entry(entry: &Value) -> Result<ManagedFieldsEntry, DiffError> {
    let text = |field: &str| entry.get(field).and_then(Value::as_str).map(str::to_string);
    let manager = text("manager").unwrap_or_default();
    let operation = match text("operation").as_deref() {
        Some("Apply") => Operation::Apply,
        Some("Update") => Operation::Update,
        other => {
            return Err(DiffError::BadManagedFields(format!(
                "manager {manager:?}: operation {other:?} is neither Apply nor Update"
            )));
        }
    };
    let fields = match entry.get("fieldsV1") {
        Some(fields_v1) => FieldSet::from_fields_v1(fields_v1)?,
        None => FieldSet::default(),
    };
    Ok(ManagedFieldsEntry {
        subresource: text("subresource").filter(|s| !s.is_empty()),
        time: text("time"),
        manager,
        operation,
        fields,
    })
}

/// The fields of `live` owned by field manager `manager`, through any
/// operation or subresource.
///
/// ```
/// use serde_json::json;
/// use tether_core::diff::owned_fields;
/// let live = json!({"metadata": {"managedFields": [{"manager": "tether", "operation": "Apply",
///     "fieldsV1": {"f:data": {"f:mode": {}}}}]}, "data": {"mode": "fast", "extra": "x"}});
/// let owned = owned_fields(&live, "tether").unwrap();
/// assert_eq!(owned.iter().map(ToString::to_string).collect::<Vec<_>>(), ["data.mode"]);
/// ```
pub fn owned_fields(live: &Value, manager: &str) -> Result<Vec<FieldPath>, DiffError> {
    Ok(manager_set(&managed_fields(live)?, manager).paths_in(live))
}

/// Everything `manager` owns across its entries.
pub(super) fn manager_set(entries: &[ManagedFieldsEntry], manager: &str) -> FieldSet {
    entries
        .iter()
        .filter(|entry| entry.manager == manager)
        .fold(FieldSet::default(), |set, entry| set.union(&entry.fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_unknown_key_prefix_is_an_error_that_quotes_the_key() {
        let err = FieldSet::from_fields_v1(&json!({"x:spec": {}})).unwrap_err();
        assert!(err.to_string().contains("\"x:spec\""), "{err}");
    }

    #[test]
    fn keyed_elements_are_found_by_their_key_fields() {
        let set = FieldSet::from_fields_v1(&json!({"f:ports": {
            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}}}}))
        .unwrap();
        let ports = set.field("ports").unwrap();
        let port = json!({"containerPort": 80, "protocol": "TCP", "name": "http"});
        assert!(ports.element(&port, 0).unwrap().is_member());
        assert!(ports.element(&json!({"containerPort": 81}), 0).is_none());
    }
}
