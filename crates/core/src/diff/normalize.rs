//! Normalization: what is removed from both sides before comparing.
//!
//! Fields the API server owns (resource version, uid, timestamps, status,
//! `managedFields`, bookkeeping annotations) never count as drift; neither
//! do the fields an [`IgnoreRule`] of the Application names.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::DiffError;
use crate::object::{ObjectRef, split_api_version};

/// `metadata` fields written by the API server.
pub const SERVER_METADATA: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Annotations written by clients and controllers as bookkeeping, not as
/// desired state.
pub const SERVER_ANNOTATIONS: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    "deployment.kubernetes.io/revision",
];

/// An `ignoreDifferences` rule of an Application: fields of matching objects
/// that are never drift (typically owned by another controller, like
/// `spec.replicas` under a HorizontalPodAutoscaler).
///
/// ```
/// use tether_core::diff::IgnoreRule;
/// let rule: IgnoreRule = serde_json::from_value(serde_json::json!({
///     "group": "apps", "kind": "Deployment",
///     "jsonPointers": ["/spec/replicas"],
///     "managedFieldsManagers": ["hpa-controller"]})).unwrap();
/// assert_eq!(rule.json_pointers[0].as_str(), "/spec/replicas");
/// ```
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IgnoreRule {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    pub kind: String,
    /// Only the object of this name (any when absent).
    pub name: Option<String>,
    /// Only objects in this namespace (any when absent).
    pub namespace: Option<String>,
    /// Fields to ignore, as RFC 6901 pointers; a `*` segment matches every
    /// key or element (`/spec/template/spec/containers/*/image`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub json_pointers: Vec<JsonPointer>,
    /// Ignore every field last written by one of these field managers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_fields_managers: Vec<String>,
}

impl IgnoreRule {
    /// Whether this rule applies to object `id`.
    pub fn matches(&self, id: &ObjectRef) -> bool {
        self.group == id.group
            && self.kind == id.kind
            && self.name.as_ref().is_none_or(|name| *name == id.name)
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| id.namespace.as_ref() == Some(ns))
    }
}

/// An RFC 6901 JSON pointer, checked when read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JsonPointer(String);

impl JsonPointer {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The unescaped segments of the pointer.
    fn segments(&self) -> Vec<String> {
        self.0
            .split('/')
            .skip(1)
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect()
    }
}

impl TryFrom<String> for JsonPointer {
    type Error = DiffError;

    fn try_from(text: String) -> Result<Self, DiffError> {
        if !text.starts_with('/') {
            return Err(DiffError::BadPointer {
                pointer: text,
                why: "must start with `/`",
            });
        }
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
                return Err(DiffError::BadPointer {
                    pointer: text,
                    why: "`~` must be followed by 0 or 1",
                });
            }
        }
        Ok(JsonPointer(text))
    }
}

impl From<JsonPointer> for String {
    fn from(pointer: JsonPointer) -> String {
        pointer.0
    }
}

/// A copy of `object` without server-owned fields, with a Secret's
/// `stringData` folded into `data` (as the server stores it).
pub fn normalize(object: &Value) -> Value {
    let mut object = object.clone();
    let Some(map) = object.as_object_mut() else {
        return object;
    };
    map.remove("status");
    if let Some(Value::Object(metadata)) = map.get_mut("metadata") {
        for field in SERVER_METADATA {
            metadata.remove(*field);
        }
        if let Some(Value::Object(annotations)) = metadata.get_mut("annotations") {
            for annotation in SERVER_ANNOTATIONS {
                annotations.remove(*annotation);
            }
        }
    }
    if is_secret(map) {
        fold_string_data(map);
    }
    object
}

/// Whether `object` is a core-group Secret.
pub(super) fn is_secret(object: &Map<String, Value>) -> bool {
    let group = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| split_api_version(v).ok())
        .map(|(group, _)| group);
    object.get("kind").and_then(Value::as_str) == Some("Secret") && group == Some("")
}

fn fold_string_data(secret: &mut Map<String, Value>) {
    let Some(Value::Object(string_data)) = secret.remove("stringData") else {
        return;
    };
    let data = secret
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    let data = data.as_object_mut().expect("just made a mapping");
    for (key, value) in string_data {
        let text = match value {
            Value::String(text) => text,
            other => other.to_string(),
        };
        let encoded = base64::engine::general_purpose::STANDARD.encode(text);
        data.insert(key, Value::String(encoded));
    }
}

/// Removes the fields `pointer` names from `object`.
pub(super) fn remove_pointer(object: &mut Value, pointer: &JsonPointer) {
    remove_segments(object, &pointer.segments());
}

fn remove_segments(value: &mut Value, segments: &[String]) {
    let Some((first, rest)) = segments.split_first() else {
        return;
    };
    let last = rest.is_empty();
    match value {
        Value::Object(map) if first == "*" => {
            if last {
                map.clear();
            } else {
                map.values_mut()
                    .for_each(|child| remove_segments(child, rest));
            }
        }
        Value::Object(map) => {
            if last {
                map.remove(first);
            } else if let Some(child) = map.get_mut(first) {
                remove_segments(child, rest);
            }
        }
        Value::Array(items) if first == "*" => {
            if last {
                items.clear();
            } else {
                items
                    .iter_mut()
                    .for_each(|child| remove_segments(child, rest));
            }
        }
        Value::Array(items) => {
            let Ok(index) = first.parse::<usize>() else {
                return;
            };
            if last {
                // Keep positions stable for the other pointers: blank the
                // element rather than shifting the rest.
                if let Some(item) = items.get_mut(index) {
                    *item = Value::Null;
                }
            } else if let Some(child) = items.get_mut(index) {
                remove_segments(child, rest);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_owned_metadata_status_and_bookkeeping_annotations_are_removed() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "uid": "u", "resourceVersion": "5", "generation": 2,
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "x"}},
            "status": {"phase": "x"}});
        assert_eq!(
            normalize(&live),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "annotations": {"team": "x"}}})
        );
    }

    #[test]
    fn secret_string_data_is_folded_into_base64_data() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "data": {"a": "YQ=="}, "stringData": {"b": "b"}});
        assert_eq!(
            normalize(&secret)["data"],
            json!({"a": "YQ==", "b": "Yg=="})
        );
    }

    #[test]
    fn a_pointer_must_start_with_a_slash_and_escape_tildes() {
        assert!(JsonPointer::try_from("spec/replicas".to_string()).is_err());
        assert!(JsonPointer::try_from("/a~2b".to_string()).is_err());
        let pointer = JsonPointer::try_from("/metadata/labels/a~1b".to_string()).unwrap();
        assert_eq!(pointer.segments(), ["metadata", "labels", "a/b"]);
    }

    #[test]
    fn wildcard_pointers_reach_every_element() {
        let mut object = json!({"containers": [{"image": "a", "name": "x"}, {"image": "b"}]});
        let pointer = JsonPointer::try_from("/containers/*/image".to_string()).unwrap();
        remove_pointer(&mut object, &pointer);
        assert_eq!(object, json!({"containers": [{"name": "x"}, {}]}));
    }
}
