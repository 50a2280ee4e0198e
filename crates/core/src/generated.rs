//! Objects the API server names: `metadata.generateName` and no
//! `metadata.name` (one-off Jobs and Pods).
//!
//! Such an object cannot be applied server-side (an apply needs a name): it
//! is created, and the API server picks its name. Until then its identity is
//! what Git says of it: kind, namespace, `generateName` and a key of its
//! content, which Tether sets on it ([`GENERATED_FROM_ANNOTATION`]). Each key
//! is created once: once the object exists (recorded in the Application's
//! status with its name and UID, or found in the watch caches by its key) the
//! desired object is named as the live one ([`named`]) and compared, checked
//! and pruned like any named object, so the generated name is never drift.
//!
//! The key is the content, not the commit: a commit that leaves the object
//! as it was creates nothing; one that changes it creates a new object, and
//! the one before becomes an orphan, pruned like any other (only when the
//! app prunes).

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::object::annotate;

/// Set by Tether on an object the API server names: the key of the desired
/// content it was created for.
pub const GENERATED_FROM_ANNOTATION: &str = "tether.dev/generated-from";

/// The `generateName` of `object` when it leaves its name to the API
/// server (no `metadata.name`).
pub fn generate_name(object: &Value) -> Option<&str> {
    let metadata = object.get("metadata")?;
    if metadata.get("name").is_some_and(|name| !name.is_null()) {
        return None;
    }
    metadata
        .get("generateName")?
        .as_str()
        .filter(|prefix| !prefix.is_empty())
}

/// The key of `object`'s content: 16 hex digits of the SHA-256 of the
/// object without its [`GENERATED_FROM_ANNOTATION`] (and without the
/// annotations map that only holds it).
pub fn key(object: &Value) -> String {
    let mut content = object.clone();
    if let Some(metadata) = content.get_mut("metadata").and_then(Value::as_object_mut)
        && let Some(annotations) = metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        && annotations.remove(GENERATED_FROM_ANNOTATION).is_some()
        && annotations.is_empty()
    {
        metadata.remove("annotations");
    }
    let digest = Sha256::digest(serde_json::to_vec(&content).unwrap_or_default());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Marks `object` (desired, named by the API server) with its key.
pub fn mark(object: &mut Value) {
    let key = key(object);
    annotate(object, GENERATED_FROM_ANNOTATION, &key);
}

/// The key `object` carries, if Tether created it for a `generateName`.
pub fn key_of(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/annotations")?
        .get(GENERATED_FROM_ANNOTATION)?
        .as_str()
}

/// `object` (desired, marked) named as the live object created for it.
pub fn named(object: &mut Value, name: &str) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("name".into(), Value::String(name.to_string()));
    }
}

/// Among `live` objects (of the desired object's kind and namespace), the
/// one created for `desired` (marked): same `generateName`, same key. When
/// several are (a controller that stopped between creating one and
/// recording it), the oldest, then the first by name; the others are
/// orphans.
pub fn pick<'a>(desired: &Value, live: &[&'a Value]) -> Option<&'a Value> {
    let prefix = desired.pointer("/metadata/generateName")?.as_str()?;
    let key = key_of(desired)?;
    let text = |object: &'a Value, pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    live.iter()
        .copied()
        .filter(|object| {
            text(object, "/metadata/generateName") == prefix && key_of(object) == Some(key)
        })
        .min_by_key(|object| {
            (
                text(object, "/metadata/creationTimestamp"),
                text(object, "/metadata/name"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(command: &str) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"generateName": "migrate-", "namespace": "shop"},
            "spec": {"template": {"spec": {"containers": [{"name": "m", "command": [command]}]}}}})
    }

    fn created(desired: &Value, name: &str, at: &str) -> Value {
        let mut live = desired.clone();
        named(&mut live, name);
        live["metadata"]["creationTimestamp"] = json!(at);
        live
    }

    #[test]
    fn only_an_object_without_a_name_is_named_by_the_server() {
        assert_eq!(generate_name(&job("up")), Some("migrate-"));
        let mut named_job = job("up");
        named(&mut named_job, "migrate-1");
        assert_eq!(generate_name(&named_job), None);
        assert_eq!(generate_name(&json!({"metadata": {"name": "a"}})), None);
    }

    #[test]
    fn the_key_follows_the_content_and_ignores_its_own_mark() {
        let mut marked = job("up");
        mark(&mut marked);
        assert_eq!(key_of(&marked), Some(key(&job("up")).as_str()));
        assert_eq!(key(&marked), key(&job("up")));
        assert_ne!(key(&job("up")), key(&job("down")));
        assert_eq!(key(&job("up")).len(), 16);
    }

    #[test]
    fn the_live_object_created_for_a_key_is_found_and_the_oldest_wins() {
        let mut desired = job("up");
        mark(&mut desired);
        let mut other = job("down");
        mark(&mut other);
        let late = created(&desired, "migrate-b", "2026-12-02T10:00:01Z");
        let early = created(&desired, "migrate-c", "2026-12-02T10:00:00Z");
        let for_other = created(&other, "migrate-a", "2026-12-02T09:00:00Z");
        let found = pick(&desired, &[&late, &for_other, &early]).unwrap();
        assert_eq!(found["metadata"]["name"], "migrate-c");
        assert!(pick(&desired, &[&for_other]).is_none());
        assert!(pick(&job("up"), &[&late]).is_none(), "an unmarked object");
    }
}
