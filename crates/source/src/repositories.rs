//! The source pipeline: update a repository, resolve the revision, verify
//! it, and render the application's path, with the render cache in front.
//!
//! Everything here blocks (Git transport, renderer processes); the
//! controller calls it inside `tokio::task::spawn_blocking`.
//!
//! ```no_run
//! # fn main() -> Result<(), tether_source::SourceError> {
//! use tether_source::{Repositories, Source};
//! let repositories = Repositories::new("/var/cache/tether".into());
//! let source = Source { repo_url: "https://git.example.com/shop.git".into(),
//!     path: "apps/web".into(), ..Default::default() };
//! // One ls-refs exchange per repository per poll, shared by its apps:
//! let update = repositories.update(&source.repo_url, None)?;
//! // For the destination cluster's version and API versions (Helm reads
//! // them); the default is "unknown".
//! let capabilities = Default::default();
//! let rendered = repositories.render(&source, &update, &capabilities)?;
//! println!("{} objects at {}", rendered.manifests.len(), rendered.commit);
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::cache::RenderCache;
use crate::chart::{ChartError, Charts};
use crate::credentials::Credentials;
use crate::files::Files;
use crate::git::{GitError, RemoteRefs, Resolved, Store, Update, resolve};
use crate::lent::{Lent, LentError, lend_renderer};
use crate::manifest::Manifest;
use crate::render::{Capabilities, RenderError, Sandbox, render};
use crate::spec::{Renderer, Revision, Source, VerifyMode};
use crate::verify::{Verifier, VerifyError};

/// A source's desired state at one revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The resolved commit id (hex).
    pub commit: String,
    /// The tree id (hex) of the application's path at that commit.
    pub tree: String,
    /// The tag that named the revision, if any.
    pub tag: Option<String>,
    /// The rendered objects, in a deterministic order.
    /// Shared with the render cache: many apps at one tree cost one copy.
    pub manifests: Arc<Vec<Manifest>>,
    /// SHA-256 (hex) of the rendered objects: two revisions with the same
    /// digest ask for exactly the same live state.
    pub digest: String,
    /// True when the render produced no objects: not an error, but prune
    /// must treat it as suspicious and never delete everything because of it.
    pub empty: bool,
    /// The keys whose signatures were verified (empty with mode `none`).
    pub verified_by: Vec<String>,
    /// What each source resolved to, in the Application's order.
    pub sources: Vec<SourceRevision>,
}

impl Rendered {
    /// One source's objects at `revision` (a commit, or a package's
    /// version), whose path tree or package digest is `tree`.
    pub(crate) fn of_source(
        source: &Source,
        revision: String,
        tree: String,
        tag: Option<String>,
        manifests: Arc<Vec<Manifest>>,
        verified_by: Vec<String>,
    ) -> Rendered {
        Rendered {
            sources: vec![SourceRevision {
                name: source.name.clone(),
                repo_url: source.repo_url.clone(),
                chart: source.chart.clone(),
                revision: revision.clone(),
                digest: tree.clone(),
            }],
            commit: revision,
            tree,
            tag,
            empty: manifests.is_empty(),
            digest: crate::manifest::digest(&manifests),
            manifests,
            verified_by,
        }
    }
}

/// What one source resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRevision {
    /// Its name among the Application's sources (may be empty).
    pub name: String,
    pub repo_url: String,
    /// The chart's name, for a chart source.
    pub chart: String,
    /// The commit (Git) or the chart version.
    pub revision: String,
    /// The tree of the source's path (Git) or the chart's digest.
    pub digest: String,
}

/// The renderer a source's directory needs (see [`Repositories::detect`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detected {
    /// The commit the revision resolved to (hex).
    pub commit: String,
    /// The names of the files directly in the directory, sorted.
    pub files: Vec<String>,
    pub detection: crate::detect::Detection,
    /// The renderer the detection names, with default options.
    pub renderer: Renderer,
}

/// Why a source could not be turned into desired state. Nothing is partly
/// rendered; the caller keeps its last good (and verified) state.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Verify(#[from] VerifyError),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error("revision {revision:?}: {reason}")]
    BadRevision { revision: String, reason: String },
    #[error("{url}: update the repository before rendering from it")]
    NotUpdated { url: String },
    /// A chart from a Helm repository or OCI registry could not be had.
    #[error("chart {chart:?} ({version}) from {error}")]
    Chart {
        chart: String,
        /// The version asked for, as written (`any version` when empty).
        version: String,
        error: ChartError,
    },
    #[error("chart {chart:?}: {reason}")]
    ChartSpec { chart: String, reason: String },
    /// An OCI artifact could not be had.
    #[error("OCI artifact ({tag}) from {error}")]
    Artifact { tag: String, error: ChartError },
    #[error(transparent)]
    Lent(#[from] LentError),
}

impl SourceError {
    /// Whether retrying later (with backoff) may succeed unchanged.
    pub fn is_retryable(&self) -> bool {
        match self {
            SourceError::Git(error) => error.is_retryable(),
            SourceError::Render(error) => error.is_retryable(),
            SourceError::NotUpdated { .. } => true,
            SourceError::Chart { error, .. } | SourceError::Artifact { error, .. } => {
                error.is_retryable()
            }
            SourceError::Verify(_)
            | SourceError::BadRevision { .. }
            | SourceError::ChartSpec { .. }
            | SourceError::Lent(_) => false,
        }
    }
}

/// How deep [`Repositories::directories`] looks.
const DIRECTORY_DEPTH: usize = 8;
/// The most directories [`Repositories::directories`] lists.
const MAX_DIRECTORIES: usize = 20_000;

/// Object stores (one per repository URL) under a cache directory, and the
/// render cache shared by all applications.
pub struct Repositories {
    cache_dir: PathBuf,
    stores: Mutex<HashMap<String, Arc<Store>>>,
    pub(crate) charts: Charts,
    pub(crate) cache: Option<RenderCache>,
    pub(crate) sandbox: Sandbox,
}

impl Repositories {
    pub fn new(cache_dir: PathBuf) -> Repositories {
        Repositories {
            charts: Charts::new(cache_dir.join("charts")),
            cache_dir,
            stores: Mutex::new(HashMap::new()),
            cache: Some(RenderCache::default()),
            sandbox: Sandbox::default(),
        }
    }

    /// Renders every time (for comparison and debugging).
    pub fn without_render_cache(mut self) -> Repositories {
        self.cache = None;
        self
    }

    pub fn with_sandbox(mut self, sandbox: Sandbox) -> Repositories {
        self.sandbox = sandbox;
        self
    }

    /// Renders run so far (cache misses); 0 without a cache.
    pub fn renders(&self) -> u64 {
        self.cache.as_ref().map_or(0, RenderCache::renders)
    }

    /// The chart cache (index reads, downloads).
    pub fn charts(&self) -> &Charts {
        &self.charts
    }

    /// Lists the remote's refs and fetches if anything is new. Call once per
    /// repository per poll (or webhook), then [`Repositories::render`] each
    /// application that uses it.
    pub fn update(
        &self,
        repo_url: &str,
        credentials: Option<&Credentials>,
    ) -> Result<Update, SourceError> {
        Ok(self.store(repo_url)?.update(credentials)?)
    }

    /// Lists the remote's refs without fetching (`git ls-remote`): the
    /// cheap check a poll makes. Uses the same transport and credentials
    /// as [`Repositories::update`].
    pub fn list_refs(
        &self,
        repo_url: &str,
        credentials: Option<&Credentials>,
    ) -> Result<RemoteRefs, SourceError> {
        Ok(self.store(repo_url)?.list_refs(credentials)?)
    }

    /// Resolves, verifies and renders `source` against `update` (the result
    /// of [`Repositories::update`] for its repository), for a cluster with
    /// `capabilities`.
    pub fn render(
        &self,
        source: &Source,
        update: &Update,
        capabilities: &Capabilities,
    ) -> Result<Rendered, SourceError> {
        self.render_lent(source, update, capabilities, &Lent::default())
    }

    /// [`Repositories::render`], a Helm source's `$NAME/…` value files
    /// read from `lent`.
    pub(crate) fn render_lent(
        &self,
        source: &Source,
        update: &Update,
        capabilities: &Capabilities,
        lent: &Lent,
    ) -> Result<Rendered, SourceError> {
        let (store, resolved) = self.resolved(source, update)?;
        // Verify it.
        let verified_by = verify(&store, source, &resolved)?;
        // Find the application's tree, then render it (or reuse the render).
        let tree = store.tree_at(resolved.commit, &source.path)?;
        let root = store.tree_at(resolved.commit, "")?;
        // Value files other sources lend: the renderer reads them where
        // they are copied, and the render is keyed by their content too.
        let (renderer, lent_digest) =
            lend_renderer(&mut Files::default(), "", &source.renderer, lent)?;
        let render_tree = || -> Result<Vec<Manifest>, SourceError> {
            let mut files = match &source.renderer {
                Renderer::Directory(_) => {
                    let files = store
                        .read_tree(tree, &self.sandbox.limits, "")
                        .map_err(|error| error.under(&source.path))?;
                    prefixed(files, &source.path)
                }
                _ => store.read_tree(root, &self.sandbox.limits, &source.path)?,
            };
            if let Renderer::Helm(_) = &source.renderer {
                // Dependencies the chart does not vendor; pinned by its
                // Chart.lock, which is part of the tree the render is
                // keyed by.
                let origin = crate::chart::deps::Origin {
                    url: &source.repo_url,
                    credentials: None,
                    insecure: false,
                };
                crate::chart::deps::vendor(&mut files, &source.path, &self.charts, &origin)
                    .map_err(|error| SourceError::Chart {
                        chart: source.path.clone(),
                        version: format!("at {}", &resolved.commit.to_string()[..12]),
                        error,
                    })?;
                lend_renderer(&mut files, &source.path, &source.renderer, lent)?;
            }
            Ok(render(
                &renderer,
                &files,
                &source.path,
                &self.sandbox,
                capabilities,
            )?)
        };
        let key = RenderCache::key(
            &format!("{tree}{lent_digest}"),
            &format!("{root}{lent_digest}"),
            &source.path,
            &renderer,
            capabilities,
        );
        let manifests = self.cached(key, render_tree)?;
        Ok(Rendered::of_source(
            source,
            resolved.commit.to_string(),
            tree.to_string(),
            resolved.tag,
            manifests,
            verified_by,
        ))
    }

    /// The renderer `source`'s directory needs at its revision, judged from
    /// its file names (see [`crate::detect`]); `source.renderer` is not
    /// looked at. Nothing is verified or rendered.
    pub fn detect(
        &self,
        source: &Source,
        credentials: Option<&Credentials>,
    ) -> Result<Detected, SourceError> {
        let update = self.update(&source.repo_url, credentials)?;
        let (store, resolved) = self.resolved(source, &update)?;
        let files = store.file_names_at(resolved.commit, source.path.trim_matches('/'))?;
        let detection = crate::detect::detect(&files);
        Ok(Detected {
            commit: resolved.commit.to_string(),
            renderer: Renderer::detected(&detection),
            detection,
            files,
        })
    }

    /// The commit `revision` of `repo_url` resolves to in `update` (the
    /// result of [`Repositories::update`] for it), and every directory of
    /// that commit (see [`crate::git::Store::directories_at`]): one fetch
    /// serves the generator and every app it generates.
    pub fn directories(
        &self,
        repo_url: &str,
        revision: &str,
        update: &Update,
    ) -> Result<(String, Vec<String>), SourceError> {
        let source = Source {
            repo_url: repo_url.to_string(),
            revision: revision.to_string(),
            ..Source::default()
        };
        let (store, resolved) = self.resolved(&source, update)?;
        let directories =
            store.directories_at(resolved.commit, DIRECTORY_DEPTH, MAX_DIRECTORIES)?;
        Ok((resolved.commit.to_string(), directories))
    }

    /// [`Repositories::update`] then [`Repositories::render`], for one source.
    pub fn fetch(
        &self,
        source: &Source,
        credentials: Option<&Credentials>,
        capabilities: &Capabilities,
    ) -> Result<Rendered, SourceError> {
        if source.is_package() {
            return self.render_package(source, credentials, capabilities, &Lent::default());
        }
        let update = self.update(&source.repo_url, credentials)?;
        self.render(source, &update, capabilities)
    }

    /// `source`'s revision resolved against `update` (its repository's
    /// refs), and the store that holds it.
    pub(crate) fn resolved(
        &self,
        source: &Source,
        update: &Update,
    ) -> Result<(Arc<Store>, Resolved), SourceError> {
        let store = self.store(&source.repo_url)?;
        let revision =
            Revision::parse(&source.revision).map_err(|reason| SourceError::BadRevision {
                revision: source.revision.clone(),
                reason,
            })?;
        let resolved = resolve(&source.repo_url, &update.refs, &revision, |id| {
            store.has_object(id)
        })?;
        Ok((store, resolved))
    }

    /// What `render` makes, from the render cache under `key` when there
    /// is a cache (only misses render; errors are not cached).
    pub(crate) fn cached(
        &self,
        key: [u8; 32],
        render: impl FnOnce() -> Result<Vec<Manifest>, SourceError>,
    ) -> Result<Arc<Vec<Manifest>>, SourceError> {
        match &self.cache {
            Some(cache) => cache.get_or_render(key, render),
            None => Ok(Arc::new(render()?)),
        }
    }

    pub(crate) fn store(&self, url: &str) -> Result<Arc<Store>, SourceError> {
        let mut stores = self.stores.lock().unwrap_or_else(|e| e.into_inner());
        let key = crate::git::repo_key(url);
        if let Some(store) = stores.get(&key) {
            return Ok(store.clone());
        }
        let store = Arc::new(Store::open(&self.cache_dir, url)?);
        stores.insert(key, store.clone());
        Ok(store)
    }
}

/// Renders a local directory (no Git, no verification): `tether render
/// DIR`, for a cluster with `capabilities`.
pub fn render_local(
    dir: &Path,
    renderer: &Renderer,
    sandbox: &Sandbox,
    capabilities: &Capabilities,
) -> Result<Rendered, SourceError> {
    let files = Files::read_dir(dir).map_err(RenderError::from)?;
    let manifests = Arc::new(render(renderer, &files, "", sandbox, capabilities)?);
    Ok(Rendered {
        commit: String::new(),
        tree: String::new(),
        tag: None,
        empty: manifests.is_empty(),
        digest: crate::manifest::digest(&manifests),
        manifests,
        verified_by: Vec::new(),
        sources: Vec::new(),
    })
}

/// Puts a directory's snapshot back at its path in the repository, so the
/// directory renderer sees the same paths for both kinds of read.
fn prefixed(files: Files, path: &str) -> Files {
    let path = path.trim_matches('/');
    if path.is_empty() {
        return files;
    }
    let entries = files
        .entries
        .into_iter()
        .map(|(file, entry)| (format!("{path}/{file}"), entry))
        .collect();
    Files { entries }
}

pub(crate) fn verify(
    store: &Store,
    source: &Source,
    resolved: &Resolved,
) -> Result<Vec<String>, SourceError> {
    let mode = source.verify.mode;
    if mode == VerifyMode::None {
        return Ok(Vec::new());
    }
    if mode == VerifyMode::Provenance {
        return Err(VerifyError::Unsigned {
            object: format!("revision {:?}", source.revision),
            reason: "verification mode provenance applies to charts; a Git source verifies head, tag or tag-and-head".into(),
        }
        .into());
    }
    let verifier = Verifier::new(&source.verify)?;
    let mut keys = Vec::new();
    if matches!(mode, VerifyMode::Tag | VerifyMode::TagAndHead) {
        let name = resolved.tag.as_deref().unwrap_or("");
        let tag = resolved.tag_object.ok_or_else(|| VerifyError::Unsigned {
            object: format!("revision {:?}", source.revision),
            reason: format!(
                "verification mode `tag` needs an annotated tag, got {}",
                if name.is_empty() {
                    "no tag".to_string()
                } else {
                    format!("lightweight tag {name}")
                }
            ),
        })?;
        let (_, raw) = store.object_bytes(tag)?;
        keys.push(verifier.verify_tag(&format!("tag {name}"), &raw)?);
    }
    if matches!(mode, VerifyMode::Head | VerifyMode::TagAndHead) {
        let (_, raw) = store.object_bytes(resolved.commit)?;
        let name = format!("commit {}", &resolved.commit.to_string()[..12]);
        keys.push(verifier.verify_commit(&name, &raw)?);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_can_be_shared_with_blocking_tasks() {
        fn shareable<T: Send + Sync + 'static>() {}
        shareable::<Repositories>();
        shareable::<Rendered>();
    }
}
