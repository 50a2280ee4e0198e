//! Applications as the API server stores them: each decoded on its own.
//!
//! A typed list of Applications fails as a whole when one item does not
//! decode (an Application stored before the CRD had a structural schema,
//! or written by a newer Tether), and a controller that cannot list
//! reconciles nothing. The controller therefore watches
//! [`StoredApplication`]s: the same resource, whose decoding never fails —
//! an item that is not a valid Application keeps its metadata and the
//! reason, so it gets a condition of its own while the others run.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::core::NamespaceResourceScope;
use serde::{Deserialize, Deserializer};

use super::Application;

/// One stored Application: decoded, or why it could not be.
#[derive(Clone, Debug)]
pub struct StoredApplication {
    pub metadata: ObjectMeta,
    pub decoded: Result<Arc<Application>, InvalidSpec>,
}

/// Why a stored Application is not a valid one: the field and the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct InvalidSpec {
    /// The field, as a path from the object's root (`spec.source.path`).
    pub path: String,
    pub reason: String,
    /// The stored status reports exactly this already (so reporting it
    /// again would only wake the Application again).
    pub reported: bool,
}

/// The reason of the `Reconciled` condition of an Application that does
/// not decode.
pub const INVALID_SPEC_REASON: &str = tether_core::notice::EventReason::InvalidSpec.as_str();

impl StoredApplication {
    /// Decodes `value`, a whole Application object as JSON.
    pub fn decode(value: &serde_json::Value) -> StoredApplication {
        let metadata = value
            .get("metadata")
            .and_then(|m| ObjectMeta::deserialize(m).ok())
            .unwrap_or_default();
        let decoded = serde_path_to_error::deserialize::<_, Application>(value)
            .map_err(|error| (error.path().to_string(), error.inner().to_string()))
            .and_then(|app| checked(app).map_err(|(path, reason)| (path.to_string(), reason)))
            .map(Arc::new)
            .map_err(|(path, reason)| {
                let shown = format!("{path}: {reason}");
                let reported = value
                    .pointer("/status/conditions")
                    .and_then(serde_json::Value::as_array)
                    .is_some_and(|conditions| {
                        conditions.iter().any(|c| {
                            c["reason"] == INVALID_SPEC_REASON
                                && c["message"].as_str().is_some_and(|m| m.ends_with(&shown))
                        })
                    });
                InvalidSpec {
                    path,
                    reason,
                    reported,
                }
            });
        StoredApplication { metadata, decoded }
    }

    /// Drops the managed fields (who wrote which field of the Application
    /// itself): nothing a watch cache serves reads them, and they are the
    /// largest part of a stored Application's metadata — with 1,000 apps,
    /// several MB held twice (the metadata and the decoded app's).
    pub fn forget_managed_fields(&mut self) {
        self.metadata.managed_fields = None;
        if let Ok(decoded) = &mut self.decoded {
            // Straight from the watch, the Arc is the only one: no copy.
            Arc::make_mut(decoded).metadata.managed_fields = None;
        }
    }
}

/// `app`, or the field (path, reason) that holds a value its type reads
/// but that means nothing (the schema refuses most such values; this is
/// for what a pattern cannot say, and for a CRD installed without it).
fn checked(app: Application) -> Result<Application, (&'static str, String)> {
    let spec = &app.spec;
    match (spec.source.is_unset(), spec.sources.is_empty()) {
        (true, true) => return Err(("spec.source", "give source or sources".into())),
        (false, false) => {
            return Err(("spec.sources", "give source or sources, not both".into()));
        }
        _ => {}
    }
    let mut names = std::collections::BTreeSet::new();
    for source in spec.sources() {
        if let Some(interval) = &source.interval
            && let Err(error) = tether_core::poll::parse_interval(interval)
        {
            return Err(("spec.source.interval", error.to_string()));
        }
        if !source.name.is_empty() && !names.insert(source.name.as_str()) {
            return Err((
                "spec.sources",
                format!("two sources are named {:?}", source.name),
            ));
        }
        if source.repo_url.is_empty() {
            return Err(("spec.sources", "a source without repoURL".into()));
        }
    }
    Ok(app)
}

impl<'de> Deserialize<'de> for StoredApplication {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(StoredApplication::decode(&value))
    }
}

impl Resource for StoredApplication {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Application::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        Application::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        Application::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        Application::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn app(spec: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "team-a", "uid": "u1"}, "spec": spec})
    }

    #[test]
    fn a_valid_application_decodes() {
        let stored = StoredApplication::decode(&app(json!({
            "source": {"repoURL": "file:///r"}, "destination": {"namespace": "shop"}})));
        assert_eq!(stored.decoded.unwrap().spec.destination.namespace, "shop");
    }

    #[test]
    fn an_invalid_application_keeps_its_name_and_names_the_field() {
        let stored = StoredApplication::decode(&app(json!({
            "source": {"repoURL": "file:///r", "path": 7}, "destination": {"namespace": "shop"}})));
        assert_eq!(stored.metadata.name.as_deref(), Some("shop"));
        let invalid = stored.decoded.unwrap_err();
        assert_eq!(invalid.path, "spec.source.path");
        assert!(invalid.reason.contains("integer"), "{}", invalid.reason);
        assert!(!invalid.reported);
    }

    #[test]
    fn an_interval_that_is_no_duration_is_an_invalid_spec_naming_the_field() {
        let stored = StoredApplication::decode(&app(json!({
            "source": {"repoURL": "file:///r", "interval": "0s"},
            "destination": {"namespace": "shop"}})));
        let invalid = stored.decoded.unwrap_err();
        assert_eq!(invalid.path, "spec.source.interval");
        assert!(invalid.reason.contains("\"0s\""), "{}", invalid.reason);
        let stored = StoredApplication::decode(&app(json!({
            "source": {"repoURL": "file:///r", "interval": "10s"},
            "destination": {"namespace": "shop"}})));
        assert!(stored.decoded.is_ok());
    }

    #[test]
    fn an_invalid_application_whose_status_says_so_is_reported_already() {
        let mut value = app(json!({"source": {"repoURL": "file:///r", "path": 7},
            "destination": {"namespace": "shop"}}));
        let shown = StoredApplication::decode(&value)
            .decoded
            .unwrap_err()
            .to_string();
        value["status"] = json!({"conditions": [{"type": "Reconciled", "status": "False",
            "reason": INVALID_SPEC_REASON, "message": format!("Application team-a/shop: {shown}")}]});
        assert!(
            StoredApplication::decode(&value)
                .decoded
                .unwrap_err()
                .reported
        );
    }

    #[test]
    fn a_list_with_one_bad_item_decodes_the_others() {
        let list = json!({"apiVersion": "v1", "kind": "List", "metadata": {},
            "items": [app(json!({"source": {}, "destination": {"namespace": "shop"}})),
                      app(json!({"source": {"repoURL": "x"}, "destination": {"namespace": "s"}}))]});
        let list: kube::core::ObjectList<StoredApplication> = serde_json::from_value(list).unwrap();
        assert!(list.items[0].decoded.is_err());
        assert!(list.items[1].decoded.is_ok());
    }
}
