//! What the CLI keeps or names on the machine it runs on: its Git cache,
//! and a local directory of manifests (`--path`) with the name its objects
//! are tracked under.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use kube::Client;
use tether_cluster::{Applier, Resources};
use tether_core::tracking::AppRef;
use tether_source::{Manifest, Repositories};

/// The CLI's Git cache (a temporary directory, kept between runs).
pub fn repositories() -> Arc<Repositories> {
    Arc::new(Repositories::new(
        std::env::temp_dir().join("tether-cli-cache"),
    ))
}

/// `--path DIR`: the directory's own name (`examples/shop` → `shop`),
/// else `app`.
pub fn directory_name(path: &Path) -> String {
    path.canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "app".into())
}

/// `--path DIR` of `tether diff` and `tether sync`: the directory's
/// manifests, rendered, and where they go.
pub struct Directory {
    pub manifests: Vec<Manifest>,
    /// Applies in `--namespace` (default `default`) the objects that name
    /// no namespace.
    pub applier: Applier,
    /// The app the objects are tracked under: `--app`, else the
    /// directory's name.
    pub app: AppRef,
}

impl Directory {
    pub fn render(
        client: Client,
        path: &Path,
        namespace: Option<&str>,
        app: Option<&str>,
    ) -> anyhow::Result<Directory> {
        let namespace = namespace.unwrap_or("default");
        let manifests = tether_source::render_directory(path)
            .with_context(|| format!("rendering {}", path.display()))?;
        let app = app.map_or_else(|| directory_name(path), str::to_string);
        Ok(Directory {
            manifests,
            applier: Applier::new(Resources::new(client), namespace.to_string()),
            app: AppRef::new(namespace, app),
        })
    }
}
