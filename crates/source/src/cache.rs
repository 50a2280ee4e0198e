//! The render cache: rendered output keyed by what it was rendered from.
//!
//! The key is the tree hash of the application's directory plus the
//! renderer and its options — not the commit — so in a monorepo a commit
//! that touches one application's directory re-renders only that one.
//! Renderers that may read outside the directory (Kustomize `../base`,
//! Jsonnet imports) are keyed by the repository's root tree instead.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::manifest::Manifest;
use crate::spec::Renderer;

/// Entries kept before the cache starts over; each is one app's objects.
const CAPACITY: usize = 20_000;

/// A thread-safe map from render inputs to rendered manifests.
#[derive(Debug, Default)]
pub struct RenderCache {
    entries: Mutex<HashMap<[u8; 32], Arc<Vec<Manifest>>>>,
    renders: AtomicU64,
}

impl RenderCache {
    /// The cache key for rendering `path` (whose tree is `tree`) of a
    /// repository whose root tree is `root` with `renderer`.
    pub fn key(tree: &str, root: &str, path: &str, renderer: &Renderer) -> [u8; 32] {
        let reads_outside = renderer.reads_outside();
        let mut hasher = Sha256::new();
        hasher.update(if reads_outside { root } else { tree });
        hasher.update([0]);
        hasher.update(path.trim_matches('/'));
        hasher.update([0]);
        hasher.update(serde_json::to_vec(renderer).unwrap_or_default());
        hasher.finalize().into()
    }

    /// The cached output for `key`, or the output of `render` (cached if it
    /// succeeded; errors are not cached).
    pub fn get_or_render<E>(
        &self,
        key: [u8; 32],
        render: impl FnOnce() -> Result<Vec<Manifest>, E>,
    ) -> Result<Arc<Vec<Manifest>>, E> {
        if let Some(hit) = self.lock().get(&key) {
            return Ok(hit.clone());
        }
        self.renders.fetch_add(1, Ordering::Relaxed);
        let manifests = Arc::new(render()?);
        let mut entries = self.lock();
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert(key, manifests.clone());
        Ok(manifests)
    }

    /// How many renders ran (cache misses) since the cache was made.
    pub fn renders(&self) -> u64 {
        self.renders.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Arc<Vec<Manifest>>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::KustomizeOptions;

    #[test]
    fn the_key_follows_the_directory_tree_not_the_commit() {
        let plain = Renderer::default();
        let a = RenderCache::key("tree1", "rootA", "apps/web", &plain);
        assert_eq!(a, RenderCache::key("tree1", "rootB", "apps/web", &plain));
        assert_ne!(a, RenderCache::key("tree2", "rootA", "apps/web", &plain));
        let kustomize = Renderer::Kustomize(KustomizeOptions {});
        assert_ne!(
            RenderCache::key("tree1", "rootA", "apps/web", &kustomize),
            RenderCache::key("tree1", "rootB", "apps/web", &kustomize)
        );
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
}
