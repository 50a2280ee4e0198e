//! Rendering a plain directory of YAML and JSON manifests.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tether_core::ObjectRef;

use crate::manifest::{Manifest, Origin, SourceError, parse_documents};

const MANIFEST_EXTENSIONS: &[&str] = &["yaml", "yml", "json"];

/// Reads every `.yaml`, `.yml` and `.json` file under `root`, recursively,
/// in sorted path order, and returns the objects they declare.
pub fn render_directory(root: &Path) -> Result<Vec<Manifest>, SourceError> {
    let mut files = Vec::new();
    collect_files(root, root, &mut files)?;
    files.sort();
    let mut manifests = Vec::new();
    let mut seen: HashMap<ObjectRef, Origin> = HashMap::new();
    for relative in files {
        let path = root.join(&relative);
        let text = std::fs::read_to_string(&path).map_err(|source| SourceError::Io {
            path: path.clone(),
            source,
        })?;
        for (document, object) in parse_documents(&relative, &text)? {
            let origin = Origin {
                file: relative.clone(),
                document,
            };
            let id =
                ObjectRef::from_object(&object).map_err(|source| SourceError::NotAnObject {
                    origin: origin.clone(),
                    source,
                })?;
            if let Some(first) = seen.insert(id.clone(), origin.clone()) {
                return Err(SourceError::Duplicate {
                    id: Box::new(id),
                    first: Box::new(first),
                    second: Box::new(origin),
                });
            }
            manifests.push(Manifest { id, object, origin });
        }
    }
    Ok(manifests)
}

fn collect_files(root: &Path, dir: &Path, files: &mut Vec<PathBuf>) -> Result<(), SourceError> {
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SourceError::Io { path, source }
    };
    for entry in std::fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(io_error(&path))?;
        if file_type.is_dir() {
            collect_files(root, &path, files)?;
        } else if file_type.is_file()
            && path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| MANIFEST_EXTENSIONS.contains(&e))
        {
            files.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        }
    }
    Ok(())
}
