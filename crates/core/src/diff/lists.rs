//! How lists and scalars compare without an OpenAPI schema.
//!
//! Kubernetes merges most lists of objects by key (containers by `name`,
//! container ports by `containerPort` + `protocol`). Without the cluster's
//! schema, the key is read from [`LIST_KEYS`] by field name, and otherwise is
//! `name` when every element has a distinct one; any other list is compared
//! by position.

use serde_json::Value;

use super::path::Segment;

/// Merge keys of well-known associative lists, by field name. Where a field
/// name has several candidates, the first whose leading key every element
/// carries wins (container `ports` vs Service `ports`).
pub const LIST_KEYS: &[(&str, &[&[&str]])] = &[
    (
        "ports",
        &[&["containerPort", "protocol"], &["port", "protocol"]],
    ),
    ("volumeMounts", &[&["mountPath"]]),
    ("volumeDevices", &[&["devicePath"]]),
    ("hostAliases", &[&["ip"]]),
    ("conditions", &[&["type"]]),
    (
        "topologySpreadConstraints",
        &[&["topologyKey", "whenUnsatisfiable"]],
    ),
];

/// The key used when a list is not in [`LIST_KEYS`].
const DEFAULT_KEY: &[&str] = &["name"];

/// The merge keys of list field `field` whose elements are `sides`, or
/// `None` when it must be compared by position.
pub(super) fn list_keys(
    field: Option<&str>,
    sides: [&[Value]; 2],
) -> Option<&'static [&'static str]> {
    let candidates: &[&[&str]] = LIST_KEYS
        .iter()
        .find(|(name, _)| Some(*name) == field)
        .map_or(&[DEFAULT_KEY], |(_, keys)| keys);
    candidates.iter().copied().find(|keys| {
        sides.iter().all(|items| {
            let mut seen: Vec<Vec<(String, Value)>> = Vec::new();
            items.iter().all(|item| {
                let key = key_of(item, keys);
                let leading = item
                    .get(keys[0])
                    .is_some_and(|v| v.is_string() || v.is_number());
                let fresh = !seen.contains(&key);
                seen.push(key);
                leading && fresh
            })
        })
    })
}

/// The key fields `item` carries, in `keys` order.
fn key_of(item: &Value, keys: &[&str]) -> Vec<(String, Value)> {
    keys.iter()
        .filter_map(|key| item.get(*key).map(|v| (key.to_string(), v.clone())))
        .collect()
}

/// The position in `candidates` of the not-yet-`used` element with the same
/// key as `item`. A key field one side leaves out (a manifest relying on the
/// default `protocol`) matches any value.
pub(super) fn find_match(
    item: &Value,
    candidates: &[Value],
    keys: &[&str],
    used: &[bool],
) -> Option<usize> {
    candidates.iter().enumerate().position(|(at, candidate)| {
        !used[at]
            && keys
                .iter()
                .all(|key| match (item.get(*key), candidate.get(*key)) {
                    (Some(a), Some(b)) => scalars_equal(a, b, false),
                    _ => true,
                })
    })
}

/// The path segment of list element `item` at `index`: by its key fields
/// when the list has keys, by position otherwise.
pub(super) fn element_segment(item: &Value, keys: Option<&[&str]>, index: usize) -> Segment {
    match keys {
        Some(keys) => Segment::Keyed {
            keys: key_of(item, keys),
            index,
        },
        None => Segment::Index(index),
    }
}

/// Whether a value counts as absent: Kubernetes drops nulls and empty
/// mappings and lists, so `labels: {}` and no labels are the same.
pub(super) fn is_absent(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// Whether two scalars are equal. Numbers compare by value (`1` equals
/// `1.0`, as JSON decoders disagree on integers). With `lenient`, a number
/// also equals a string of the same text (`replicas: 1` in a manifest
/// against a quantity `"1"` the server keeps as a string).
pub(super) fn scalars_equal(a: &Value, b: &Value, lenient: bool) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Number(n), Value::String(s)) | (Value::String(s), Value::Number(n)) if lenient => {
            s.parse::<f64>().ok() == n.as_f64()
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn container_and_service_ports_get_their_own_keys() {
        let container = [json!({"containerPort": 80})];
        let service = [json!({"port": 80, "protocol": "TCP"})];
        assert_eq!(
            list_keys(Some("ports"), [&container, &container]),
            Some(&["containerPort", "protocol"][..])
        );
        assert_eq!(
            list_keys(Some("ports"), [&service, &service]),
            Some(&["port", "protocol"][..])
        );
    }

    #[test]
    fn lists_with_duplicate_or_missing_names_compare_by_position() {
        let dup = [json!({"name": "a"}), json!({"name": "a"})];
        let scalars = [json!("a")];
        assert_eq!(list_keys(Some("items"), [&dup, &dup]), None);
        assert_eq!(list_keys(Some("args"), [&scalars, &scalars]), None);
    }

    #[test]
    fn integers_equal_floats_and_lenient_numbers_equal_their_text() {
        assert!(scalars_equal(&json!(1), &json!(1.0), false));
        assert!(!scalars_equal(&json!(1), &json!("1"), false));
        assert!(scalars_equal(&json!(1), &json!("1"), true));
        assert!(!scalars_equal(&json!(2), &json!("1"), true));
    }
}
