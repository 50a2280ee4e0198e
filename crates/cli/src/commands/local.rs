//! What the CLI keeps or names on the machine it runs on: its Git cache,
//! and the name a local directory's objects are tracked under.

use std::path::Path;
use std::sync::Arc;

use tether_source::Repositories;

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
