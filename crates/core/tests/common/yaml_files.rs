//! Fixture files for the tests and the bench.

use std::path::{Path, PathBuf};

/// The `.yaml` files at or anywhere under `path`, in path order.
pub fn yaml_files(path: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect(path, &mut files);
    files.sort();
    files
}

fn collect(path: &Path, files: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            collect(&entry.unwrap().path(), files);
        }
    } else if path.extension().is_some_and(|ext| ext == "yaml") {
        files.push(path.to_path_buf());
    }
}
