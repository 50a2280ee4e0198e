//! Secret masking: no Secret value ever leaves a [`Diff`](super::Diff).
//!
//! Values under a Secret's `data` and `stringData` are replaced by a mask.
//! With the controller's key ([`SecretMask::Keyed`]) the mask shows a short
//! HMAC of the value, so a reader can still tell that two values differ (or
//! that a value did not change) without seeing either, and without being
//! able to test guesses: an unkeyed digest of a short password is a
//! dictionary lookup away, and anyone who may `view` an Application reads
//! its drift. Without the key ([`SecretMask::Hidden`]: the CLI, run with a
//! person's credentials) the mask shows nothing at all.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::FieldDiff;
use super::path::Segment;

/// The Secret fields whose values are masked.
pub const SECRET_FIELDS: &[&str] = &["data", "stringData"];

/// Hex digits of the digest shown: enough to tell values apart at a glance.
const SHOWN_DIGITS: usize = 8;

/// How Secret values are masked.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SecretMask<'k> {
    /// A short HMAC-SHA256 of the value under this key (the controller's
    /// audit key): `<redacted hmac:1f2e3d4c…>`.
    Keyed(&'k [u8]),
    /// No trace of the value: `<redacted>`.
    Hidden,
}

impl std::fmt::Debug for SecretMask<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SecretMask::Keyed(_) => "Keyed(<key>)",
            SecretMask::Hidden => "Hidden",
        })
    }
}

/// The mask for one secret value.
pub fn mask(value: &Value, how: SecretMask<'_>) -> Value {
    let SecretMask::Keyed(key) = how else {
        return Value::String("<redacted>".into());
    };
    let bytes = match value {
        Value::String(text) => text.clone().into_bytes(),
        other => other.to_string().into_bytes(),
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(&bytes);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .flat_map(|byte| [byte >> 4, byte & 0xf])
        .take(SHOWN_DIGITS)
        .map(|nibble| char::from_digit(u32::from(nibble), 16).expect("a nibble is a hex digit"))
        .collect();
    Value::String(format!("<redacted hmac:{hex}…>"))
}

/// Masks every value of `field` that sits under a secret field.
pub(super) fn mask_field(field: &mut FieldDiff, how: SecretMask<'_>) {
    let sides = [&mut field.desired, &mut field.live].into_iter().flatten();
    match field.path.segments().first() {
        // A whole object: mask the secret fields inside it.
        None => {
            for side in sides {
                for name in SECRET_FIELDS {
                    if let Some(values) = side.get_mut(*name) {
                        mask_leaves(values, how);
                    }
                }
            }
        }
        Some(Segment::Field(top)) if SECRET_FIELDS.contains(&top.as_str()) => {
            sides.for_each(|side| mask_leaves(side, how));
        }
        Some(_) => {}
    }
}

fn mask_leaves(value: &mut Value, how: SecretMask<'_>) {
    match value {
        Value::Object(map) => map.values_mut().for_each(|v| mask_leaves(v, how)),
        Value::Array(items) => items.iter_mut().for_each(|v| mask_leaves(v, how)),
        Value::Null => {}
        leaf => *leaf = mask(leaf, how),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: SecretMask<'static> = SecretMask::Keyed(b"controller key");

    #[test]
    fn equal_values_get_equal_masks_and_different_values_different_ones() {
        assert_eq!(mask(&json!("hunter2"), KEY), mask(&json!("hunter2"), KEY));
        assert_ne!(mask(&json!("hunter2"), KEY), mask(&json!("hunter3"), KEY));
        let shown = mask(&json!("hunter2"), KEY);
        assert!(shown.as_str().unwrap().starts_with("<redacted hmac:"));
        assert!(!shown.as_str().unwrap().contains("hunter2"));
    }

    #[test]
    fn secret_values_are_masked_with_a_keyed_hash() {
        let value = json!("hunter2");
        // Not the unkeyed digest anyone can look up (sha256("hunter2") starts f52fbd32).
        let keyed = mask(&value, KEY);
        assert!(!keyed.as_str().unwrap().contains("f52fbd32"), "{keyed}");
        // The same value under another key masks differently…
        assert_ne!(keyed, mask(&value, SecretMask::Keyed(b"another cluster")));
        // …and without a key nothing of the value shows.
        assert_eq!(mask(&value, SecretMask::Hidden), json!("<redacted>"));
        assert_eq!(
            mask(&json!("hunter3"), SecretMask::Hidden),
            mask(&value, SecretMask::Hidden)
        );
    }
}

/// A copy of `object` fit to print: if it is a Secret, every value under
/// `data` and `stringData` is masked without a trace ([`SecretMask::Hidden`]:
/// whoever prints it has no key).
pub fn masked_for_display(object: &Value) -> Value {
    let mut object = object.clone();
    let is_secret = object.get("kind").and_then(Value::as_str) == Some("Secret")
        && object.get("apiVersion").and_then(Value::as_str) == Some("v1");
    if is_secret {
        for field in SECRET_FIELDS {
            if let Some(Value::Object(values)) = object.get_mut(*field) {
                for value in values.values_mut() {
                    *value = mask(value, SecretMask::Hidden);
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
        assert!(shown.contains("\"<redacted>\""), "{shown}");
    }
}
