//! Files a test lays out: manifests in a directory, stand-in tools.

use std::path::{Path, PathBuf};

/// Writes `text` to `path` below `root`, making the directories between.
pub fn write_file(root: &Path, path: &str, text: &str) -> PathBuf {
    let file = root.join(path);
    std::fs::create_dir_all(file.parent().expect("a file below the root")).unwrap();
    std::fs::write(&file, text).unwrap();
    file
}

/// Writes an executable `path` below `root` (a stand-in tool or a hook)
/// with `text`, e.g. `#!/bin/sh\n…`.
pub fn write_script(root: &Path, path: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let file = write_file(root, path, text);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    file
}
