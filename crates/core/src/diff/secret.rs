//! Secret masking: no Secret value ever leaves a [`Diff`](super::Diff).
//!
//! Values under a Secret's `data` and `stringData` are replaced by a short
//! digest, so a reader can still tell that two values differ (or that a
//! value did not change) without seeing either.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::FieldDiff;
use super::path::Segment;

/// The Secret fields whose values are masked.
pub const SECRET_FIELDS: &[&str] = &["data", "stringData"];

/// Hex digits of the digest shown: enough to tell values apart at a glance.
const SHOWN_DIGITS: usize = 8;

/// The mask for one secret value: `<redacted sha256:1f2e3d4c…>`.
pub fn mask(value: &Value) -> Value {
    let bytes = match value {
        Value::String(text) => text.clone().into_bytes(),
        other => other.to_string().into_bytes(),
    };
    let digest = Sha256::digest(&bytes);
    let hex: String = digest
        .iter()
        .flat_map(|byte| [byte >> 4, byte & 0xf])
        .take(SHOWN_DIGITS)
        .map(|nibble| char::from_digit(u32::from(nibble), 16).expect("a nibble is a hex digit"))
        .collect();
    Value::String(format!("<redacted sha256:{hex}…>"))
}

/// Masks every value of `field` that sits under a secret field.
pub(super) fn mask_field(field: &mut FieldDiff) {
    let sides = [&mut field.desired, &mut field.live].into_iter().flatten();
    match field.path.segments().first() {
        // A whole object: mask the secret fields inside it.
        None => {
            for side in sides {
                for name in SECRET_FIELDS {
                    if let Some(values) = side.get_mut(*name) {
                        mask_leaves(values);
                    }
                }
            }
        }
        Some(Segment::Field(top)) if SECRET_FIELDS.contains(&top.as_str()) => {
            sides.for_each(mask_leaves);
        }
        Some(_) => {}
    }
}

fn mask_leaves(value: &mut Value) {
    match value {
        Value::Object(map) => map.values_mut().for_each(mask_leaves),
        Value::Array(items) => items.iter_mut().for_each(mask_leaves),
        Value::Null => {}
        leaf => *leaf = mask(leaf),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_values_get_equal_masks_and_different_values_different_ones() {
        assert_eq!(mask(&json!("hunter2")), mask(&json!("hunter2")));
        assert_ne!(mask(&json!("hunter2")), mask(&json!("hunter3")));
        let shown = mask(&json!("hunter2"));
        assert!(shown.as_str().unwrap().starts_with("<redacted sha256:"));
        assert!(!shown.as_str().unwrap().contains("hunter2"));
    }
}

/// A copy of `object` fit to print: if it is a Secret, every value under
/// `data` and `stringData` is masked.
pub fn masked_for_display(object: &Value) -> Value {
    let mut object = object.clone();
    let is_secret = object.get("kind").and_then(Value::as_str) == Some("Secret")
        && object.get("apiVersion").and_then(Value::as_str) == Some("v1");
    if is_secret {
        for field in SECRET_FIELDS {
            if let Some(Value::Object(values)) = object.get_mut(*field) {
                for value in values.values_mut() {
                    *value = mask(value);
                }
            }
        }
    }
    object
}

#[cfg(test)]
mod display_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_secret_printed_for_a_person_shows_no_value() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "data": {"password": "aHVudGVyMg=="}, "stringData": {"token": "hunter2"}});
        let shown = masked_for_display(&secret).to_string();
        assert!(
            !shown.contains("aHVudGVyMg==") && !shown.contains("hunter2"),
            "{shown}"
        );
        assert!(shown.contains("<redacted sha256:"));
    }
}
