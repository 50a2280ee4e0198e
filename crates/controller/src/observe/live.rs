//! Live state from watch caches of the managed objects only.
//!
//! One watch per served kind, label-selected on `tether.dev/app` across all
//! namespaces, started the first time an application applies an object of
//! that kind. Every event on a watched object wakes the application that
//! owns it (found from the label value), so drift is noticed as soon as the
//! API server reports it: no polling, no whole-cluster cache. The objects
//! are held as text ([`super::packed`]) and expanded when read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use tether_cluster::resources::ServedKind;
use tether_core::ObjectRef;
use tether_core::tracking::APP_LABEL;
use tokio::sync::{mpsc, watch};

use super::packed::PackedStore;
use crate::watch_retry::Retrying;

/// An Application to reconcile, named by namespace and name.
pub type AppKey = (String, String);

/// A served kind: group, version, kind.
type KindKey = (String, String, String);

/// One kind's cache, and whether its first list has arrived.
///
/// Readiness is a `tokio::sync::watch` rather than `Store::wait_until_ready`:
/// the latter keeps a single waker, so when several reconciles wait for a
/// new kind at once all but the last are never woken (seen in the
/// benchmark: 3 of 200 applications stuck forever, holding workers).
#[derive(Clone)]
struct Watched {
    store: Arc<RwLock<PackedStore>>,
    ready: watch::Receiver<bool>,
}

/// The watch caches, and who to wake when something in them changes.
#[derive(Clone)]
pub struct LiveCache {
    client: kube::Client,
    stores: Arc<Mutex<HashMap<KindKey, Watched>>>,
    owners: Arc<Mutex<HashMap<String, AppKey>>>,
    wake: mpsc::UnboundedSender<AppKey>,
    /// Counts events across every watch, for waiters that need to look
    /// again whenever anything cached changes (a sync wave's health).
    changed: Arc<watch::Sender<u64>>,
    /// The watch tasks; they stop when the last clone of the cache goes.
    tasks: Arc<Tasks>,
}

/// Watch tasks, aborted on drop: a stopped controller leaves no watch behind.
#[derive(Default)]
struct Tasks(Mutex<Vec<tokio::task::JoinHandle<()>>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for task in self.0.get_mut().expect("lock").drain(..) {
            task.abort();
        }
    }
}

impl LiveCache {
    /// A cache whose change notifications are sent to `wake`.
    pub fn new(client: kube::Client, wake: mpsc::UnboundedSender<AppKey>) -> Self {
        LiveCache {
            client,
            stores: Arc::default(),
            tasks: Arc::default(),
            owners: Arc::default(),
            wake,
            changed: Arc::new(watch::channel(0).0),
        }
    }

    /// A receiver that sees a change whenever any cached object changes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Remembers that objects labelled `label_value` belong to `app`.
    pub fn register_owner(&self, label_value: String, app: AppKey) {
        self.owners.lock().expect("lock").insert(label_value, app);
    }

    /// The live object `id` of kind `served`, from the watch cache (starting
    /// the watch and waiting for its first list if this is a new kind).
    pub async fn get(&self, served: &ServedKind, id: &ObjectRef) -> Option<Arc<DynamicObject>> {
        let store = self.store(served).await;
        let object = store
            .read()
            .expect("lock")
            .get(id.namespace.as_deref(), &id.name);
        object.map(Arc::new)
    }

    /// The cached objects of kind `served` in `namespace` labelled
    /// `label_value` (starting the watch if this is a new kind).
    pub async fn labelled_in(
        &self,
        served: &ServedKind,
        namespace: Option<&str>,
        label_value: &str,
    ) -> Vec<Arc<DynamicObject>> {
        let store = self.store(served).await;
        let found = store
            .read()
            .expect("lock")
            .labelled(Some(namespace), label_value);
        found.into_iter().map(Arc::new).collect()
    }

    /// Every cached object labelled `label_value`, across the kinds watched
    /// so far, with its identity.
    pub fn labelled(&self, label_value: &str) -> Vec<(ObjectRef, Arc<DynamicObject>)> {
        let stores = self.stores.lock().expect("lock");
        stores
            .iter()
            .flat_map(|((group, _, kind), watched)| {
                let found = watched
                    .store
                    .read()
                    .expect("lock")
                    .labelled(None, label_value);
                found
                    .into_iter()
                    .map(|object| {
                        let id = ObjectRef {
                            group: group.clone(),
                            kind: kind.clone(),
                            namespace: object.metadata.namespace.clone(),
                            name: object.metadata.name.clone().unwrap_or_default(),
                        };
                        (id, Arc::new(object))
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// How many objects the caches hold, across kinds.
    pub fn len(&self) -> usize {
        let stores = self.stores.lock().expect("lock");
        stores
            .values()
            .map(|watched| watched.store.read().expect("lock").len())
            .sum()
    }

    /// Whether the caches hold nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    async fn store(&self, served: &ServedKind) -> Arc<RwLock<PackedStore>> {
        let resource = &served.resource;
        let key = (
            resource.group.clone(),
            resource.version.clone(),
            resource.kind.clone(),
        );
        let existing = self.stores.lock().expect("lock").get(&key).cloned();
        let mut watched = match existing {
            Some(watched) => watched,
            None => self.start_watch(key, served),
        };
        // A store is ready once its first list has arrived.
        let _ = watched.ready.wait_for(|ready| *ready).await;
        watched.store
    }

    fn start_watch(&self, key: (String, String, String), served: &ServedKind) -> Watched {
        let mut stores = self.stores.lock().expect("lock");
        if let Some(watched) = stores.get(&key) {
            return watched.clone();
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &served.resource);
        let store = Arc::new(RwLock::new(PackedStore::default()));
        let writer = store.clone();
        let (ready_tx, ready) = watch::channel(false);
        let config = watcher::Config::default().labels(APP_LABEL).any_semantic();
        let owners = self.owners.clone();
        let wake = self.wake.clone();
        let changed = self.changed.clone();
        let kind = served.resource.kind.clone();
        // A list response's items carry no apiVersion/kind (watch events
        // do): fill them in, or every object listed at start-up would
        // differ from desired state in those two fields.
        let types = kube::api::TypeMeta {
            api_version: served.resource.api_version.clone(),
            kind: served.resource.kind.clone(),
        };
        let stream = watcher(api, config).retrying().modify(move |object| {
            if object.types.is_none() {
                object.types = Some(types.clone());
            }
        });
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                if let Ok(event) = &event {
                    writer.write().expect("lock").apply(event);
                }
                match event {
                    Ok(watcher::Event::Apply(object) | watcher::Event::Delete(object)) => {
                        wake_owner(&owners, &wake, &object);
                        changed.send_modify(|count| *count = count.wrapping_add(1));
                    }
                    Ok(watcher::Event::InitDone) => {
                        ready_tx.send_replace(true);
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%kind, %error, "watch interrupted; retrying"),
                }
            }
        });
        self.tasks.0.lock().expect("lock").push(task);
        let watched = Watched { store, ready };
        stores.insert(key, watched.clone());
        watched
    }
}

fn wake_owner(
    owners: &Mutex<HashMap<String, AppKey>>,
    wake: &mpsc::UnboundedSender<AppKey>,
    object: &DynamicObject,
) {
    let Some(label) = object
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(APP_LABEL))
    else {
        return;
    };
    if let Some(app) = owners.lock().expect("lock").get(label).cloned() {
        let _ = wake.send(app);
    }
}
