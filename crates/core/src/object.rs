//! Object identity: which Kubernetes object a manifest describes.
//!
//! Every message Tether prints about an object starts with its [`ObjectRef`]
//! (`Deployment shop/web`), so identity is decided once, here.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The identity of a Kubernetes object: group, kind, namespace and name.
///
/// The version is not part of identity: `apps/v1` and `apps/v1beta2`
/// Deployments with the same name are the same object.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectRef {
    /// API group; empty for the core group (`v1`).
    pub group: String,
    pub kind: String,
    /// Namespace; `None` for cluster-scoped objects or when not yet defaulted.
    pub namespace: Option<String>,
    pub name: String,
}

/// Why a manifest does not describe an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    #[error("not a mapping: a Kubernetes object is a YAML/JSON mapping")]
    NotAMapping,
    #[error("missing field `{0}`")]
    MissingField(&'static str),
    #[error("field `{field}` must be a non-empty string")]
    NotAString { field: &'static str },
    #[error("field `{0}` must be a mapping")]
    NotAMappingField(&'static str),
    #[error("apiVersion {} is not of the form `group/version` or `version`", crate::metadata::quoted(.0))]
    BadApiVersion(String),
    #[error("{field} {} is not a valid name: {reason}", crate::metadata::quoted(.value))]
    BadName {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
}

/// Checks `name` as the API server checks every object name before it
/// becomes part of a request path (`ValidatePathSegmentName`, and the
/// 253-character limit of every name), so no name can reach a URL as
/// something other than one path segment.
pub fn check_name(field: &'static str, name: &str) -> Result<(), ObjectError> {
    let bad = |reason| {
        Err(ObjectError::BadName {
            field,
            value: name.chars().take(80).collect(),
            reason,
        })
    };
    if name == "." || name == ".." {
        return bad("may not be '.' or '..'");
    }
    if name.contains(['/', '%']) {
        return bad("may not contain '/' or '%'");
    }
    if name.len() > 253 {
        return bad("must be no more than 253 characters");
    }
    if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return bad("may not contain spaces or control characters");
    }
    Ok(())
}

/// Checks `namespace` as a DNS-1123 label, as the API server does.
pub fn check_namespace(namespace: &str) -> Result<(), ObjectError> {
    let valid = namespace.len() <= 63
        && namespace
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !namespace.starts_with('-')
        && !namespace.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(ObjectError::BadName {
            field: "metadata.namespace",
            value: namespace.chars().take(80).collect(),
            reason: "must be a DNS-1123 label: at most 63 lowercase letters, digits or '-', \
                     starting and ending with a letter or digit",
        })
    }
}

impl ObjectRef {
    /// Reads the identity of `object`, checking `apiVersion`, `kind` and
    /// `metadata.name`. An object that leaves its name to the API server
    /// (`metadata.generateName`, no `metadata.name`) is named by its
    /// `generateName` until it is created (see [`crate::generated`]).
    ///
    /// ```
    /// use tether_core::object::ObjectRef;
    /// let object = serde_json::json!({
    ///     "apiVersion": "apps/v1", "kind": "Deployment",
    ///     "metadata": {"name": "web", "namespace": "shop"}});
    /// assert_eq!(ObjectRef::from_object(&object).unwrap().to_string(), "Deployment shop/web");
    /// ```
    pub fn from_object(object: &Value) -> Result<Self, ObjectError> {
        let map = object.as_object().ok_or(ObjectError::NotAMapping)?;
        let api_version = required_str(map.get("apiVersion"), "apiVersion")?;
        let kind = required_str(map.get("kind"), "kind")?;
        let metadata = match map.get("metadata") {
            None | Some(Value::Null) => return Err(ObjectError::MissingField("metadata")),
            Some(metadata) if !metadata.is_object() => {
                return Err(ObjectError::NotAMappingField("metadata"));
            }
            Some(metadata) => metadata,
        };
        let name = match (metadata.get("name"), metadata.get("generateName")) {
            (None | Some(Value::Null), Some(generate_name)) => {
                let prefix = required_str(Some(generate_name), "metadata.generateName")?;
                check_name("metadata.generateName", prefix)?;
                prefix
            }
            (name, _) => {
                let name = required_str(name, "metadata.name")?;
                check_name("metadata.name", name)?;
                name
            }
        };
        if !kind.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(ObjectError::BadName {
                field: "kind",
                value: kind.chars().take(80).collect(),
                reason: "must be letters and digits only",
            });
        }
        let namespace = match metadata.get("namespace") {
            None | Some(Value::Null) => None,
            Some(Value::String(ns)) if ns.is_empty() => None,
            Some(Value::String(ns)) => {
                check_namespace(ns)?;
                Some(ns.clone())
            }
            Some(_) => {
                return Err(ObjectError::NotAString {
                    field: "metadata.namespace",
                });
            }
        };
        let (group, _version) = split_api_version(api_version)?;
        Ok(ObjectRef {
            group: group.to_string(),
            kind: kind.to_string(),
            namespace,
            name: name.to_string(),
        })
    }

    /// The same object placed in `namespace` if it has none yet.
    pub fn in_namespace(mut self, namespace: &str) -> Self {
        if self.namespace.is_none() {
            self.namespace = Some(namespace.to_string());
        }
        self
    }

    /// `Kind` or `Kind.group`, as kubectl prints a resource type.
    pub fn group_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// Sets annotation `key` to `value` on `object`, adding the annotations
/// mapping if there is none; an object without `metadata`, or whose
/// annotations are not a mapping, is left as it is.
pub fn annotate(object: &mut Value, key: &str, value: &str) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(key.into(), Value::String(value.into()));
    }
}

/// Splits `apps/v1` into `("apps", "v1")` and `v1` into `("", "v1")`.
pub fn split_api_version(api_version: &str) -> Result<(&str, &str), ObjectError> {
    let bad = || ObjectError::BadApiVersion(api_version.to_string());
    let version_ok = |v: &str| !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric());
    // A DNS subdomain: dot-separated labels of lowercase letters, digits
    // and '-', none empty or starting or ending with '-'.
    let group_ok = |g: &str| {
        g.len() <= 253
            && g.split('.').all(|label| {
                !label.is_empty()
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            })
    };
    match api_version.split_once('/') {
        None if version_ok(api_version) => Ok(("", api_version)),
        Some((group, version)) if group_ok(group) && version_ok(version) => Ok((group, version)),
        _ => Err(bad()),
    }
}

fn required_str<'a>(value: Option<&'a Value>, field: &'static str) -> Result<&'a str, ObjectError> {
    match value {
        None | Some(Value::Null) => Err(ObjectError::MissingField(field)),
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(_) => Err(ObjectError::NotAString { field }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_core_group_object_prints_kind_namespace_and_name() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "shop"}});
        let id = ObjectRef::from_object(&object).unwrap();
        assert_eq!(id.group, "");
        assert_eq!(id.to_string(), "ConfigMap shop/settings");
        assert_eq!(id.group_kind(), "ConfigMap");
    }

    #[test]
    fn a_cluster_scoped_object_has_no_namespace() {
        let object = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "reader"}});
        let id = ObjectRef::from_object(&object).unwrap();
        assert_eq!(id.to_string(), "ClusterRole reader");
        assert_eq!(id.group_kind(), "ClusterRole.rbac.authorization.k8s.io");
    }

    #[test]
    fn a_manifest_without_a_name_names_the_missing_field() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
        assert_eq!(
            ObjectRef::from_object(&object).unwrap_err().to_string(),
            "missing field `metadata.name`"
        );
    }

    #[test]
    fn a_manifest_that_leaves_its_name_to_the_server_is_named_by_its_prefix() {
        let object = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"generateName": "migrate-", "namespace": "shop"}});
        let id = ObjectRef::from_object(&object).unwrap();
        assert_eq!(id.to_string(), "Job shop/migrate-");
        let bad = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"generateName": "a/b-"}});
        assert!(
            ObjectRef::from_object(&bad)
                .unwrap_err()
                .to_string()
                .contains("metadata.generateName")
        );
    }

    #[test]
    fn a_manifest_without_kind_or_api_version_is_rejected() {
        let no_kind = json!({"apiVersion": "v1", "metadata": {"name": "x"}});
        assert_eq!(
            ObjectRef::from_object(&no_kind),
            Err(ObjectError::MissingField("kind"))
        );
        let no_version = json!({"kind": "ConfigMap", "metadata": {"name": "x"}});
        assert_eq!(
            ObjectRef::from_object(&no_version),
            Err(ObjectError::MissingField("apiVersion"))
        );
    }

    #[test]
    fn malformed_api_versions_are_rejected() {
        for bad in ["/v1", "apps/", "a/b/c"] {
            assert!(split_api_version(bad).is_err(), "{bad}");
        }
        assert_eq!(split_api_version("apps/v1").unwrap(), ("apps", "v1"));
    }

    #[test]
    fn a_default_namespace_applies_only_when_none_is_set() {
        let object = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "a"}});
        let id = ObjectRef::from_object(&object).unwrap().in_namespace("b");
        assert_eq!(id.namespace.as_deref(), Some("a"));
    }

    #[test]
    fn names_that_would_leave_their_path_segment_are_refused_before_any_request() {
        let object = |name: &str, namespace: &str| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace}})
        };
        for name in ["..", ".", "a/b", "../../secrets", "x%2F", "a b"] {
            let error = ObjectRef::from_object(&object(name, "shop")).unwrap_err();
            assert!(
                error.to_string().contains("metadata.name"),
                "{name}: {error}"
            );
        }
        for namespace in ["kube-system/../x", "UPPER", "-a", "a.b"] {
            let error = ObjectRef::from_object(&object("web", namespace)).unwrap_err();
            assert!(error.to_string().contains("metadata.namespace"), "{error}");
        }
        assert!(ObjectRef::from_object(&object(&"a".repeat(254), "shop")).is_err());
        assert!(ObjectRef::from_object(&object("web-1.example", "shop-2")).is_ok());
        let bad_api =
            serde_json::json!({"apiVersion": "../v1", "kind": "X", "metadata": {"name": "a"}});
        assert!(ObjectRef::from_object(&bad_api).is_err());
        let bad_kind = serde_json::json!({"apiVersion": "v1", "kind": "Config/Map", "metadata": {"name": "a"}});
        assert!(ObjectRef::from_object(&bad_kind).is_err());
    }
}
