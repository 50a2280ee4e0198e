//! How Tether marks the objects it manages.
//!
//! Every applied object carries a label (cheap to select on in watches) and
//! an annotation naming the owning Application and the object's own identity.
//! Both must match before Tether treats an object as its own: a label alone
//! is easy to copy onto an object Tether never created.

use serde_json::{Map, Value};

use crate::object::ObjectRef;

/// Label selecting every object of one Application.
pub const APP_LABEL: &str = "tether.dev/app";
/// Annotation binding an object to its Application and identity.
pub const TRACKING_ANNOTATION: &str = "tether.dev/tracking-id";
/// The field manager Tether applies with.
pub const FIELD_MANAGER: &str = "tether";

/// Label values are at most 63 characters.
const MAX_LABEL_VALUE: usize = 63;

/// The Application that owns an object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AppRef {
    pub namespace: String,
    pub name: String,
}

impl AppRef {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        AppRef {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The value of [`APP_LABEL`]: `namespace.name`, or a stable hash of it
    /// when that does not fit in a label value.
    pub fn label_value(&self) -> String {
        let full = format!("{}.{}", self.namespace, self.name);
        if full.len() <= MAX_LABEL_VALUE {
            return full;
        }
        let prefix: String = full.chars().take(MAX_LABEL_VALUE - 17).collect();
        let prefix = prefix.trim_end_matches(['.', '-']);
        format!("{prefix}-{:016x}", fnv1a(full.as_bytes()))
    }

    /// The value of [`TRACKING_ANNOTATION`] for object `id` of this app.
    pub fn tracking_id(&self, id: &ObjectRef) -> String {
        format!(
            "{}/{}:{}/{}:{}/{}",
            self.namespace,
            self.name,
            id.group,
            id.kind,
            id.namespace.as_deref().unwrap_or(""),
            id.name
        )
    }
}

/// The identity a tracking annotation names for `object` (identity `id`):
/// an object the API server named ([`crate::generated`]) is named by its
/// `generateName`, the only name known when it is created.
fn tracked(object: &Value, id: &ObjectRef) -> ObjectRef {
    let prefix = crate::generated::key_of(object)
        .and(object.pointer("/metadata/generateName"))
        .and_then(Value::as_str);
    match prefix {
        Some(prefix) => ObjectRef {
            name: prefix.to_string(),
            ..id.clone()
        },
        None => id.clone(),
    }
}

/// Adds the app label and tracking annotation to `object`.
pub fn stamp(object: &mut Value, app: &AppRef, id: &ObjectRef) {
    let tracking_id = app.tracking_id(&tracked(object, id));
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let metadata = entry_map(map, "metadata");
    entry_map(metadata, "labels").insert(APP_LABEL.into(), Value::String(app.label_value()));
    entry_map(metadata, "annotations")
        .insert(TRACKING_ANNOTATION.into(), Value::String(tracking_id));
}

/// Whether live `object` (identity `id`) carries both of `app`'s marks.
pub fn is_tracked_by(object: &Value, app: &AppRef, id: &ObjectRef) -> bool {
    let label = object
        .pointer("/metadata/labels")
        .and_then(|l| l.get(APP_LABEL));
    let annotation = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(TRACKING_ANNOTATION));
    label.and_then(Value::as_str) == Some(app.label_value().as_str())
        && annotation.and_then(Value::as_str)
            == Some(app.tracking_id(&tracked(object, id)).as_str())
}

fn entry_map<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = map
        .entry(key.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().expect("just made an object")
}

/// 64-bit FNV-1a: small, stable across releases and platforms.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn web() -> (Value, ObjectRef) {
        let object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"team": "a"}}});
        let id = ObjectRef::from_object(&object).unwrap();
        (object, id)
    }

    #[test]
    fn a_stamped_object_is_tracked_by_its_app_and_no_other() {
        let (mut object, id) = web();
        let app = AppRef::new("tether", "shop");
        stamp(&mut object, &app, &id);
        assert_eq!(object["metadata"]["labels"]["team"], "a");
        assert_eq!(object["metadata"]["labels"][APP_LABEL], "tether.shop");
        assert_eq!(
            object["metadata"]["annotations"][TRACKING_ANNOTATION],
            "tether/shop:apps/Deployment:shop/web"
        );
        assert!(is_tracked_by(&object, &app, &id));
        assert!(!is_tracked_by(
            &object,
            &AppRef::new("tether", "other"),
            &id
        ));
    }

    #[test]
    fn a_label_without_the_annotation_is_not_ownership() {
        let (mut object, id) = web();
        let app = AppRef::new("tether", "shop");
        object["metadata"]["labels"][APP_LABEL] = json!(app.label_value());
        assert!(!is_tracked_by(&object, &app, &id));
    }

    #[test]
    fn an_object_the_server_named_is_tracked_by_its_generate_name() {
        let mut object = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"generateName": "migrate-", "namespace": "shop"}});
        crate::generated::mark(&mut object);
        let app = AppRef::new("tether", "shop");
        let declared = ObjectRef::from_object(&object).unwrap();
        stamp(&mut object, &app, &declared);
        assert_eq!(
            object["metadata"]["annotations"][TRACKING_ANNOTATION],
            "tether/shop:batch/Job:shop/migrate-"
        );
        // Created, it has the name the server gave it and the same marks.
        crate::generated::named(&mut object, "migrate-x7k2p");
        let created = ObjectRef::from_object(&object).unwrap();
        assert!(is_tracked_by(&object, &app, &created));
        let mut restamped = object.clone();
        stamp(&mut restamped, &app, &created);
        assert_eq!(restamped, object);
    }

    #[test]
    fn long_app_names_get_a_stable_hashed_label_value() {
        let app = AppRef::new("platform-team-namespace", "a".repeat(80));
        let value = app.label_value();
        assert!(value.len() <= 63, "{value}");
        assert_eq!(value, app.label_value());
        assert_ne!(
            value,
            AppRef::new("platform-team-namespace", "a".repeat(81)).label_value()
        );
    }
}
