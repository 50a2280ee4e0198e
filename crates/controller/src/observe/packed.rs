//! One kind's watched objects, held compactly.
//!
//! Each object is kept as its JSON text — exactly as the API server sent
//! it, less the `kubectl.kubernetes.io/last-applied-configuration`
//! annotation, which no decision reads (the diff drops it on both sides) —
//! deflated (`tether_source::deflated`: an object's keys and
//! `managedFields` repeat themselves, a ConfigMap's text halves), beside
//! the one label lookups filter on. A `serde_json::Value` tree costs
//! several times its text: every non-empty mapping is a B-tree node of
//! about half a kilobyte, and `managedFields`, which drift attribution
//! needs whole, are mostly such small mappings. An object is expanded only
//! when a reconcile reads it, which a steady state never does.
//!
//! The store follows the watch's events as kube's reflector does: a relist
//! is gathered aside and replaces the objects when complete.

use std::collections::HashMap;

use kube::api::DynamicObject;
use kube::runtime::watcher;
use tether_core::tracking::APP_LABEL;
use tether_source::deflated::{deflate, inflate};

/// The annotation `kubectl apply` (client-side) writes: a copy of the whole
/// object, which the diff ignores and nothing else reads.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Watched objects of one kind, by `namespace/name` (`/name` when
/// cluster-scoped).
#[derive(Debug, Default)]
pub struct PackedStore {
    objects: HashMap<Box<str>, Packed>,
    /// A relist in progress: what it has listed so far.
    relist: Option<HashMap<Box<str>, Packed>>,
}

/// One object as deflated JSON text, and the label lookups filter on.
#[derive(Debug)]
struct Packed {
    app: Box<str>,
    deflated: Box<[u8]>,
}

impl PackedStore {
    /// Follows one event of the watch.
    pub fn apply(&mut self, event: &watcher::Event<DynamicObject>) {
        match event {
            watcher::Event::Apply(object) => match pack(object) {
                Some((key, packed)) => {
                    self.objects.insert(key, packed);
                }
                None => {
                    self.objects.remove(key_of(object).as_str());
                }
            },
            watcher::Event::Delete(object) => {
                self.objects.remove(key_of(object).as_str());
            }
            watcher::Event::Init => self.relist = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                if let (Some(relist), Some((key, packed))) = (&mut self.relist, pack(object)) {
                    relist.insert(key, packed);
                }
            }
            watcher::Event::InitDone => {
                if let Some(mut listed) = self.relist.take() {
                    listed.shrink_to_fit();
                    self.objects = listed;
                }
            }
        }
    }

    /// The object `name` in `namespace`, expanded.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<DynamicObject> {
        let key = format!("{}/{name}", namespace.unwrap_or_default());
        self.objects.get(key.as_str()).and_then(unpack)
    }

    /// The objects labelled `tether.dev/app: app`, expanded; only those in
    /// `namespace` when given (`Some(None)`: cluster-scoped ones).
    pub fn labelled(&self, namespace: Option<Option<&str>>, app: &str) -> Vec<DynamicObject> {
        self.objects
            .iter()
            .filter(|(key, packed)| {
                &*packed.app == app
                    && namespace.is_none_or(|namespace| {
                        key.split_once('/').map(|(ns, _)| ns) == Some(namespace.unwrap_or_default())
                    })
            })
            .filter_map(|(_, packed)| unpack(packed))
            .collect()
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }
}

fn key_of(object: &DynamicObject) -> String {
    format!(
        "{}/{}",
        object.metadata.namespace.as_deref().unwrap_or_default(),
        object.metadata.name.as_deref().unwrap_or_default()
    )
}

fn pack(object: &DynamicObject) -> Option<(Box<str>, Packed)> {
    let app = object.metadata.labels.as_ref()?.get(APP_LABEL)?;
    let has_last_applied = object
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(LAST_APPLIED));
    let text = if has_last_applied {
        let mut trimmed = object.clone();
        if let Some(annotations) = &mut trimmed.metadata.annotations {
            annotations.remove(LAST_APPLIED);
        }
        serde_json::to_vec(&trimmed)
    } else {
        serde_json::to_vec(object)
    };
    let packed = Packed {
        app: app.as_str().into(),
        deflated: deflate(&text.ok()?),
    };
    Some((key_of(object).into_boxed_str(), packed))
}

fn unpack(packed: &Packed) -> Option<DynamicObject> {
    serde_json::from_slice(&inflate(&packed.deflated)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(namespace: &str, name: &str, app: &str, value: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "7",
                "labels": {APP_LABEL: app, "team": "a"},
                "annotations": {LAST_APPLIED: "{\"big\":\"copy\"}", "note": "kept"},
                "managedFields": [{"manager": "tether", "operation": "Apply",
                    "apiVersion": "v1", "fieldsType": "FieldsV1",
                    "time": "2026-01-01T00:00:00Z",
                    "fieldsV1": {"f:data": {"f:value": {}}}}]},
            "data": {"value": value}}))
        .unwrap()
    }

    #[test]
    fn an_object_reads_back_as_sent_without_the_last_applied_annotation() {
        let mut store = PackedStore::default();
        let sent = object("shop", "web", "shop.web", "1");
        store.apply(&watcher::Event::Apply(sent.clone()));
        let read = store.get(Some("shop"), "web").unwrap();
        let mut expected = sent;
        expected
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .remove(LAST_APPLIED);
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            serde_json::to_value(&expected).unwrap()
        );
        assert_eq!(store.get(Some("other"), "web").map(|_| ()), None);
    }

    #[test]
    fn an_object_much_larger_than_its_deflated_text_reads_back_whole() {
        let mut store = PackedStore::default();
        let value = "abcdefgh".repeat(50_000);
        store.apply(&watcher::Event::Apply(object(
            "shop", "big", "shop.big", &value,
        )));
        let read = store.get(Some("shop"), "big").unwrap();
        assert_eq!(read.data["data"]["value"], value.as_str());
    }

    #[test]
    fn lookups_by_label_keep_to_the_namespace_asked_for() {
        let mut store = PackedStore::default();
        for (ns, name, app) in [("a", "x", "app"), ("b", "y", "app"), ("a", "z", "other")] {
            store.apply(&watcher::Event::Apply(object(ns, name, app, "1")));
        }
        let names = |found: Vec<DynamicObject>| {
            let mut names: Vec<String> =
                found.into_iter().filter_map(|o| o.metadata.name).collect();
            names.sort();
            names
        };
        assert_eq!(names(store.labelled(None, "app")), ["x", "y"]);
        assert_eq!(names(store.labelled(Some(Some("a")), "app")), ["x"]);
        assert!(store.labelled(Some(None), "app").is_empty());
    }

    #[test]
    fn a_relist_replaces_the_objects_only_once_complete() {
        let mut store = PackedStore::default();
        store.apply(&watcher::Event::Apply(object("a", "gone", "app", "1")));
        store.apply(&watcher::Event::Init);
        store.apply(&watcher::Event::InitApply(object("a", "kept", "app", "2")));
        assert!(store.get(Some("a"), "gone").is_some(), "still the old list");
        store.apply(&watcher::Event::InitDone);
        assert!(store.get(Some("a"), "gone").is_none());
        assert_eq!(store.len(), 1);
        store.apply(&watcher::Event::Delete(object("a", "kept", "app", "2")));
        assert_eq!(store.len(), 0);
    }
}
