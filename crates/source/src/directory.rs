//! Rendering a plain directory of YAML and JSON manifests.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use tether_core::ObjectRef;

use crate::files::{Entry, Files};
use crate::limits::{Budget, Limits};
use crate::manifest::{Manifest, ManifestError, Origin, identify, parse_file_within};

const MANIFEST_EXTENSIONS: &[&str] = &["yaml", "yml", "json"];

/// Which files of a plain directory are manifests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DirectoryOptions {
    /// Globs over paths relative to the directory (`*.yaml`, `prod/**`); when
    /// set, only matching files are read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// Globs of files to skip, applied after `include`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
}

/// Reads every `.yaml`, `.yml` and `.json` file under `root`, recursively,
/// in sorted path order, and returns the objects they declare. Origins are
/// relative to `root`. The directory is held to the default [`Limits`].
pub fn render_directory(root: &Path) -> Result<Vec<Manifest>, ManifestError> {
    render_files(
        &Files::read_dir(root)?,
        "",
        &DirectoryOptions::default(),
        &mut Budget::new(Limits::default()),
    )
}

/// Renders the manifest files of `files` in sorted path order. `prefix` (the
/// directory's path in the repository) is prepended to each origin's file.
/// Any error means nothing is rendered; all the files share `budget`.
pub fn render_files(
    files: &Files,
    prefix: &str,
    options: &DirectoryOptions,
    budget: &mut Budget,
) -> Result<Vec<Manifest>, ManifestError> {
    let include = glob_set(&options.include)?;
    let exclude = glob_set(&options.exclude)?;
    let mut objects = Vec::new();
    for (relative, entry) in &files.entries {
        let is_manifest = Path::new(relative)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| MANIFEST_EXTENSIONS.contains(&e));
        if !is_manifest
            || (!options.include.is_empty() && !include.is_match(relative))
            || exclude.is_match(relative)
        {
            continue;
        }
        let path = repository_path(prefix, relative);
        match entry {
            Entry::File(bytes) => objects.extend(parse_file_within(&path, bytes, budget)?),
            Entry::Symlink(target) => {
                return Err(ManifestError::Rejected {
                    path,
                    reason: format!(
                        "is a symlink (to {target:?}); manifests must be regular files"
                    ),
                });
            }
        }
    }
    let manifests = identify(objects)?;
    check_duplicates(&manifests)?;
    Ok(manifests)
}

fn repository_path(prefix: &str, relative: &str) -> PathBuf {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        PathBuf::from(relative)
    } else {
        PathBuf::from(format!("{prefix}/{relative}"))
    }
}

fn glob_set(globs: &[String]) -> Result<GlobSet, ManifestError> {
    let mut builder = GlobSetBuilder::new();
    for glob in globs {
        let parsed = Glob::new(glob).map_err(|error| ManifestError::Glob {
            glob: glob.clone(),
            message: error.kind().to_string(),
        })?;
        builder.add(parsed);
    }
    builder.build().map_err(|error| ManifestError::Glob {
        glob: globs.join(", "),
        message: error.to_string(),
    })
}

/// Two manifests for the same object are an error, whichever renderer made them.
pub fn check_duplicates(manifests: &[Manifest]) -> Result<(), ManifestError> {
    let mut seen: HashMap<&ObjectRef, &Origin> = HashMap::new();
    for manifest in manifests {
        if let Some(first) = seen.insert(&manifest.id, &manifest.origin) {
            return Err(ManifestError::Duplicate {
                id: Box::new(manifest.id.clone()),
                first: Box::new(first.clone()),
                second: Box::new(manifest.origin.clone()),
            });
        }
    }
    Ok(())
}
