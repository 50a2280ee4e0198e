//! Rendering a plain directory of YAML and JSON manifests.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use tether_core::ObjectRef;

use crate::files::{Entry, Files, in_dir};
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
    read_manifests(files, prefix, options, budget).map_err(|error| misread(files, prefix, error))
}

/// An error that a directory holding a kustomization or a Helm chart met as
/// plain YAML (`kustomization.yaml:1: missing field metadata`), with the
/// renderer it needs; any other error as it is.
fn misread(files: &Files, prefix: &str, error: ManifestError) -> ManifestError {
    if !matches!(
        error,
        ManifestError::NotAnObject { .. } | ManifestError::Parse { .. }
    ) {
        return error;
    }
    let Some((what, detection)) = crate::detect::described(&files.paths()) else {
        return error;
    };
    let file = repository_path(prefix, detection.file.as_deref().unwrap_or_default());
    let renderer = detection.kind.as_str();
    let hint = format!(
        "this directory holds {what} ({}), not plain manifests: render it with the \
         {renderer} renderer (spec.source.renderer: {{{renderer}: {{}}}}; tether app create \
         --renderer {renderer}, or leave --renderer out to detect it)",
        file.display()
    );
    ManifestError::Misread {
        error: Box::new(error),
        hint,
    }
}

fn read_manifests(
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
    PathBuf::from(in_dir(prefix, relative))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn files(entries: &[(&str, &str)]) -> Files {
        Files::of_texts(entries)
    }

    fn render(files: &Files) -> Result<Vec<Manifest>, ManifestError> {
        render_files(
            files,
            "app",
            &DirectoryOptions::default(),
            &mut Budget::new(Limits::default()),
        )
    }

    const CONFIG_MAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n";

    #[test]
    fn a_kustomization_read_as_plain_yaml_says_which_renderer_it_needs() {
        let kustomization = "resources:\n  - cm.yaml\n";
        let error = render(&files(&[
            ("cm.yaml", CONFIG_MAP),
            ("kustomization.yaml", kustomization),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("app/kustomization.yaml:1: missing field"),
            "{error}"
        );
        assert!(
            error.contains(
                "this directory holds a kustomization (app/kustomization.yaml), not plain \
                 manifests: render it with the kustomize renderer"
            ) && error.contains("--renderer kustomize")
                && error.contains("leave --renderer out to detect it"),
            "{error}"
        );
    }

    #[test]
    fn a_chart_read_as_plain_yaml_says_it_is_a_helm_chart() {
        let error = render(&files(&[
            ("Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n"),
            ("templates/cm.yaml", CONFIG_MAP),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            error.contains("a Helm chart (app/Chart.yaml)")
                && error.contains("spec.source.renderer: {helm: {}}")
                && error.contains("--renderer helm"),
            "{error}"
        );
    }

    #[test]
    fn other_errors_and_plain_directories_get_no_hint() {
        let error = render(&files(&[("cm.yaml", "kind: ConfigMap\n")]))
            .unwrap_err()
            .to_string();
        assert!(!error.contains("renderer"), "{error}");
        // A kustomization in a subdirectory is not this directory's.
        let error = render(&files(&[("base/kustomization.yaml", "resources: []\n")]))
            .unwrap_err()
            .to_string();
        assert!(!error.contains("renderer"), "{error}");
        // Excluded, the kustomization is no error at all.
        let manifests = render_files(
            &files(&[
                ("cm.yaml", CONFIG_MAP),
                ("kustomization.yaml", "resources: []\n"),
            ]),
            "",
            &DirectoryOptions {
                exclude: vec!["kustomization.yaml".into()],
                ..Default::default()
            },
            &mut Budget::new(Limits::default()),
        )
        .unwrap();
        assert_eq!(manifests.len(), 1);
    }
}
