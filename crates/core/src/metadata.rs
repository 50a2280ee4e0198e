//! Names, labels and annotations as the API server validates them, so that
//! a desired state with one invalid object is refused before anything of it
//! is applied (the API server would refuse that one object mid-apply).
//!
//! [`crate::object::check_name`] only keeps a name one URL path segment;
//! this module holds the kind-specific rules: most kinds need a DNS-1123
//! subdomain, a Namespace a DNS-1123 label, a Service a DNS-1035 label, and
//! RBAC objects (`system:controller:x`) only a path segment.

use serde_json::Value;

use crate::object::ObjectRef;

/// The API server's limit on all of an object's annotations together.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// Why an object's metadata would be refused by the API server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    #[error("{field} {value} is not a valid {kind} name: {rule}")]
    Name {
        field: &'static str,
        kind: String,
        value: String,
        rule: &'static str,
    },
    #[error("metadata.{field} must be a mapping of strings")]
    NotAMapping { field: &'static str },
    #[error("metadata.{field}[{key}]: the key is not valid: {rule}")]
    Key {
        field: &'static str,
        key: String,
        rule: &'static str,
    },
    #[error("metadata.{field}[{key}]: the value {value} is not valid: {rule}")]
    Value {
        field: &'static str,
        key: String,
        value: String,
        rule: &'static str,
    },
    #[error(
        "metadata.annotations are {bytes} bytes; the API server takes at most {MAX_ANNOTATIONS_BYTES}"
    )]
    AnnotationsTooLarge { bytes: usize },
}

const SUBDOMAIN: &str = "must be a DNS-1123 subdomain: at most 253 lowercase letters, digits, \
                         '-' or '.', starting and ending with a letter or digit";
const LABEL_1123: &str = "must be a DNS-1123 label: at most 63 lowercase letters, digits or \
                          '-', starting and ending with a letter or digit";
const LABEL_1035: &str = "must be a DNS-1035 label: at most 63 lowercase letters, digits or \
                          '-', starting with a letter and ending with a letter or digit";
const INVISIBLE: &str = "may not contain invisible or bidirectional-control characters";
const QUALIFIED_NAME: &str = "must be 63 or fewer letters, digits, '-', '_' or '.', starting \
                              and ending with a letter or digit, with an optional DNS-1123 \
                              subdomain prefix and '/'";
const LABEL_VALUE: &str = "must be empty or 63 or fewer letters, digits, '-', '_' or '.', \
                           starting and ending with a letter or digit";

/// Checks the name, labels and annotations of `object`, whose identity
/// `id` has already been read (so its name is a path segment).
pub fn check_metadata(id: &ObjectRef, object: &Value) -> Result<(), MetadataError> {
    let metadata = &object["metadata"];
    let generated = metadata.get("name").is_none_or(Value::is_null);
    check_kind_name(id, generated)?;
    check_labels(metadata.get("labels"))?;
    check_annotations(metadata.get("annotations"))
}

/// The name rule of `id`'s kind. A `generateName` prefix may end in '-'.
fn check_kind_name(id: &ObjectRef, generated: bool) -> Result<(), MetadataError> {
    let name = &id.name;
    let bad = |rule| {
        Err(MetadataError::Name {
            field: if generated {
                "metadata.generateName"
            } else {
                "metadata.name"
            },
            kind: id.kind.clone(),
            value: quoted(name),
            rule,
        })
    };
    if name.chars().any(is_invisible) {
        return bad(INVISIBLE);
    }
    let checked = match name.strip_suffix('-') {
        Some(prefix) if generated => format!("{prefix}a"),
        _ => name.clone(),
    };
    match (id.group.as_str(), id.kind.as_str()) {
        ("rbac.authorization.k8s.io", _) => Ok(()),
        ("", "Namespace") if !is_dns1123_label(&checked) => bad(LABEL_1123),
        ("", "Service")
            if !(is_dns1123_label(&checked)
                && checked.starts_with(|c: char| c.is_ascii_lowercase())) =>
        {
            bad(LABEL_1035)
        }
        _ if !is_dns1123_subdomain(&checked) => bad(SUBDOMAIN),
        _ => Ok(()),
    }
}

fn check_labels(labels: Option<&Value>) -> Result<(), MetadataError> {
    let field = "labels";
    for (key, value) in string_map(field, labels)? {
        check_key(field, key)?;
        let bad = |rule| MetadataError::Value {
            field,
            key: quoted(key),
            value: shown(value),
            rule,
        };
        let text = match value {
            Value::Null => "",
            Value::String(text) => text,
            _ => return Err(bad("must be a string (quote it)")),
        };
        if !text.is_empty() && !is_qualified_name_part(text) {
            return Err(bad(LABEL_VALUE));
        }
    }
    Ok(())
}

fn check_annotations(annotations: Option<&Value>) -> Result<(), MetadataError> {
    let field = "annotations";
    let mut bytes = 0;
    for (key, value) in string_map(field, annotations)? {
        check_key(field, key)?;
        let text = match value {
            Value::Null => "",
            Value::String(text) => text,
            _ => {
                return Err(MetadataError::Value {
                    field,
                    key: quoted(key),
                    value: shown(value),
                    rule: "must be a string (quote it)",
                });
            }
        };
        bytes += key.len() + text.len();
    }
    if bytes > MAX_ANNOTATIONS_BYTES {
        return Err(MetadataError::AnnotationsTooLarge { bytes });
    }
    Ok(())
}

fn string_map<'a>(
    field: &'static str,
    value: Option<&'a Value>,
) -> Result<Vec<(&'a String, &'a Value)>, MetadataError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => Ok(map.iter().collect()),
        Some(_) => Err(MetadataError::NotAMapping { field }),
    }
}

/// A label or annotation key: `[prefix/]name`, the prefix a DNS-1123
/// subdomain, the name a qualified-name part.
fn check_key(field: &'static str, key: &str) -> Result<(), MetadataError> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let valid = prefix.is_none_or(is_dns1123_subdomain) && is_qualified_name_part(name);
    if valid {
        Ok(())
    } else {
        Err(MetadataError::Key {
            field,
            key: quoted(key),
            rule: QUALIFIED_NAME,
        })
    }
}

fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => quoted(text),
        other => other.to_string().chars().take(80).collect(),
    }
}

/// `text` in double quotes, at most 80 characters of it, with every
/// character that is not printable ASCII written as `\u{…}`: a homoglyph
/// (`w\u{435}b`) or a bidirectional control is then seen for what it is.
pub fn quoted(text: &str) -> String {
    let mut shown = String::from('"');
    for (index, c) in text.chars().enumerate() {
        if index == 80 {
            shown.push('…');
            break;
        }
        match c {
            '"' | '\\' => {
                shown.push('\\');
                shown.push(c);
            }
            ' '..='~' => shown.push(c),
            _ => shown.extend(c.escape_unicode()),
        }
    }
    shown.push('"');
    shown
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 characters.
fn is_qualified_name_part(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
fn is_dns1123_label(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .first()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes
            .last()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// Dot-separated DNS-1123 labels, at most 253 characters.
fn is_dns1123_subdomain(text: &str) -> bool {
    text.len() <= 253 && text.split('.').all(is_dns1123_label)
}

/// Characters that change how text is shown without being seen: zero-width
/// characters and bidirectional controls (the "Trojan Source" trick).
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(object: Value) -> Result<(), MetadataError> {
        let id = ObjectRef::from_object(&object).unwrap();
        check_metadata(&id, &object)
    }

    fn named(api_version: &str, kind: &str, name: &str) -> Value {
        json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}})
    }

    #[test]
    fn names_follow_the_rule_of_their_kind() {
        assert!(check(named("v1", "ConfigMap", "web.v2-a")).is_ok());
        assert!(check(named("v1", "ConfigMap", "Web")).is_err());
        assert!(check(named("v1", "Namespace", "shop.prod")).is_err());
        assert!(check(named("v1", "Service", "1web")).is_err());
        assert!(check(named("v1", "Service", "web-1")).is_ok());
        let role = "system:controller:Web_1";
        assert!(check(named("rbac.authorization.k8s.io/v1", "ClusterRole", role)).is_ok());
        let rtl = "web\u{202e}";
        assert!(check(named("rbac.authorization.k8s.io/v1", "Role", rtl)).is_err());
    }

    #[test]
    fn homoglyphs_and_invisible_characters_are_shown_escaped() {
        let error = check(named("v1", "ConfigMap", "w\u{435}b"))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("metadata.name \"w\\u{435}b\" is not a valid ConfigMap name"),
            "{error}"
        );
        let mut object = named("v1", "ConfigMap", "web");
        object["metadata"]["labels"] = json!({"app": "pr\u{200b}od"});
        let error = check(object).unwrap_err().to_string();
        assert!(
            error.contains("the value \"pr\\u{200b}od\" is not valid"),
            "{error}"
        );
    }

    #[test]
    fn a_generate_name_prefix_may_end_with_a_dash() {
        let job = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"generateName": "migrate-"}});
        assert!(check(job).is_ok());
    }

    #[test]
    fn labels_and_annotations_are_held_to_the_api_servers_rules() {
        let with = |metadata: Value| {
            let mut object = named("v1", "ConfigMap", "web");
            object["metadata"]
                .as_object_mut()
                .unwrap()
                .extend(metadata.as_object().unwrap().clone());
            check(object)
        };
        assert!(
            with(json!({"labels": {"app.kubernetes.io/name": "web", "empty": "", "n": null}}))
                .is_ok()
        );
        let error = with(json!({"labels": {"app": "a b"}}))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("metadata.labels[\"app\"]: the value \"a b\" is not valid"),
            "{error}"
        );
        assert!(with(json!({"labels": {"app": 1}})).is_err());
        assert!(with(json!({"labels": {"a/b/c": "x"}})).is_err());
        assert!(with(json!({"annotations": {"note": "any text at all"}})).is_ok());
        assert!(with(json!({"annotations": {"Bad_Prefix/x": "y"}})).is_err());
        let big = "x".repeat(MAX_ANNOTATIONS_BYTES);
        assert!(with(json!({"annotations": {"big": big}})).is_err());
    }
}
