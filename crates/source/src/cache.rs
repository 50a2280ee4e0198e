//! The render cache: rendered output keyed by what it was rendered from.
//!
//! The key is the tree hash of the application's directory plus the
//! renderer and its options — not the commit — so in a monorepo a commit
//! that touches one application's directory re-renders only that one.
//! Renderers that may read outside the directory (Kustomize `../base`,
//! Jsonnet imports) are keyed by the repository's root tree instead. Helm's
//! output also depends on the destination cluster's capabilities (version
//! and API versions), so they are part of its key, and only of its.
//!
//! An entry keeps its objects (with their identities and origins) as one
//! deflated JSON text: a
//! `serde_json::Value` tree costs several times its text (each non-empty
//! mapping is a B-tree node of about half a kilobyte), and with thousands
//! of apps the desired state was the controller's largest holding; an
//! app's objects repeat their keys and labels, so deflated together they
//! take a fraction of their text. While some caller still holds the
//! objects of an entry, a hit shares them; else it reads them back from the
//! text (tens of microseconds for an app's objects, against a render).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use sha2::{Digest, Sha256};

use crate::deflated::{deflate, inflate};
use crate::manifest::Manifest;
use crate::render::Capabilities;
use crate::spec::Renderer;

/// Entries kept before the cache starts over; each is one app's objects.
const CAPACITY: usize = 20_000;

/// A thread-safe map from render inputs to rendered manifests.
#[derive(Debug, Default)]
pub struct RenderCache {
    entries: Mutex<HashMap<[u8; 32], Entry>>,
    renders: AtomicU64,
}

/// One render's objects, with their identities and origins, as one JSON
/// array, deflated, and shared while anyone holds them.
#[derive(Debug)]
struct Entry {
    deflated: Box<[u8]>,
    shared: Weak<Vec<Manifest>>,
}

impl Entry {
    fn new(manifests: &Arc<Vec<Manifest>>) -> Option<Entry> {
        Some(Entry {
            deflated: deflate(&serde_json::to_vec(&**manifests).ok()?),
            shared: Arc::downgrade(manifests),
        })
    }

    /// The objects: the shared copy if one is still held, else read back.
    fn manifests(&mut self) -> Option<Arc<Vec<Manifest>>> {
        if let Some(shared) = self.shared.upgrade() {
            return Some(shared);
        }
        let manifests: Vec<Manifest> = serde_json::from_slice(&inflate(&self.deflated)?).ok()?;
        let manifests = Arc::new(manifests);
        self.shared = Arc::downgrade(&manifests);
        Some(manifests)
    }
}

impl RenderCache {
    /// The cache key for rendering `path` (whose tree is `tree`) of a
    /// repository whose root tree is `root` with `renderer`, for a cluster
    /// with `capabilities`.
    pub fn key(
        tree: &str,
        root: &str,
        path: &str,
        renderer: &Renderer,
        capabilities: &Capabilities,
    ) -> [u8; 32] {
        let reads_outside = renderer.reads_outside();
        let mut hasher = Sha256::new();
        hasher.update(if reads_outside { root } else { tree });
        hasher.update([0]);
        hasher.update(path.trim_matches('/'));
        hasher.update([0]);
        hasher.update(serde_json::to_vec(renderer).unwrap_or_default());
        if renderer.uses_capabilities() {
            hasher.update([0]);
            hasher.update(serde_json::to_vec(capabilities).unwrap_or_default());
        }
        hasher.finalize().into()
    }

    /// The cached output for `key`, or the output of `render` (cached if it
    /// succeeded; errors are not cached).
    pub fn get_or_render<E>(
        &self,
        key: [u8; 32],
        render: impl FnOnce() -> Result<Vec<Manifest>, E>,
    ) -> Result<Arc<Vec<Manifest>>, E> {
        if let Some(hit) = self.lock().get_mut(&key).and_then(Entry::manifests) {
            return Ok(hit);
        }
        self.renders.fetch_add(1, Ordering::Relaxed);
        let manifests = Arc::new(render()?);
        let mut entries = self.lock();
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        if let Some(entry) = Entry::new(&manifests) {
            entries.insert(key, entry);
        }
        Ok(manifests)
    }

    /// How many renders ran (cache misses) since the cache was made.
    pub fn renders(&self) -> u64 {
        self.renders.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Origin;
    use crate::spec::{HelmOptions, KustomizeOptions};
    use tether_core::ObjectRef;

    fn key(tree: &str, root: &str, renderer: &Renderer) -> [u8; 32] {
        RenderCache::key(tree, root, "apps/web", renderer, &Capabilities::default())
    }

    #[test]
    fn the_key_follows_the_directory_tree_not_the_commit() {
        let plain = Renderer::default();
        let a = key("tree1", "rootA", &plain);
        assert_eq!(a, key("tree1", "rootB", &plain));
        assert_ne!(a, key("tree2", "rootA", &plain));
        let kustomize = Renderer::Kustomize(KustomizeOptions {});
        assert_ne!(
            key("tree1", "rootA", &kustomize),
            key("tree1", "rootB", &kustomize)
        );
    }

    #[test]
    fn a_helm_key_changes_with_the_clusters_capabilities_and_no_other_does() {
        let served = |kinds: &[&str]| {
            let kinds = kinds.iter().map(|k| k.to_string()).collect();
            [("monitoring.example.com/v1".to_string(), kinds)]
        };
        let v133 = Capabilities::from_discovery("v1.33.0", "1", "33", served(&[]));
        let v134 = Capabilities::from_discovery("v1.34.0", "1", "34", served(&[]));
        let with_crd = Capabilities::from_discovery("v1.34.0", "1", "34", served(&["Probe"]));
        let key = |renderer: &Renderer, capabilities: &Capabilities| {
            RenderCache::key("tree", "root", "apps/web", renderer, capabilities)
        };
        let helm = Renderer::Helm(HelmOptions::default());
        assert_ne!(key(&helm, &v133), key(&helm, &v134));
        assert_ne!(key(&helm, &v134), key(&helm, &with_crd));
        assert_ne!(key(&helm, &Capabilities::default()), key(&helm, &v134));
        assert_eq!(key(&helm, &v134), key(&helm, &v134.clone()));
        let plain = Renderer::default();
        assert_eq!(key(&plain, &v133), key(&plain, &with_crd));
    }

    #[test]
    fn only_misses_render_and_errors_are_not_cached() {
        let cache = RenderCache::default();
        let key = [1; 32];
        assert!(
            cache
                .get_or_render(key, || Err::<Vec<Manifest>, _>("boom"))
                .is_err()
        );
        cache.get_or_render(key, || Ok::<_, ()>(vec![])).unwrap();
        cache
            .get_or_render(key, || Err::<Vec<Manifest>, _>(()))
            .unwrap();
        assert_eq!(cache.renders(), 2);
    }

    #[test]
    fn a_hit_reads_the_objects_back_as_rendered_and_shares_them_while_held() {
        let cache = RenderCache::default();
        let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "web", "namespace": "shop"},
            "data": {"ratio": 0.1, "count": 18446744073709551615u64, "neg": -3, "text": "é\n"}});
        let manifest = Manifest {
            id: ObjectRef::from_object(&object).unwrap(),
            object,
            origin: Origin {
                file: "apps/web/config.yaml".into(),
                document: 1,
                line: 4,
                item: Some(2),
            },
        };
        let rendered = cache
            .get_or_render([7; 32], || Ok::<_, ()>(vec![manifest.clone()]))
            .unwrap();
        let again = cache.get_or_render([7; 32], || Err(())).unwrap();
        assert!(Arc::ptr_eq(&rendered, &again), "shared while held");
        drop((rendered, again));
        let read_back = cache.get_or_render([7; 32], || Err(())).unwrap();
        assert_eq!(*read_back, vec![manifest]);
        assert_eq!(cache.renders(), 1);
    }
}
