//! Renderers: turning the files at an application's path into objects.
//!
//! Plain directories and Jsonnet are rendered in-process from the object
//! store's snapshot; Kustomize and Helm run their binaries in a private
//! temporary copy of the repository (see [`process`]), and their output is
//! parsed like any YAML stream. Every renderer's output is checked the same
//! way: identities, duplicates, and all-or-nothing.

mod jsonnet;
mod process;

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use crate::directory::{check_duplicates, render_files};
use crate::files::Files;
use crate::manifest::{Manifest, ManifestError, identify, parse_file};
use crate::spec::{HelmOptions, Renderer};

/// How renderer binaries run: their bounds, and where to find them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    pub timeout: Duration,
    pub max_output_bytes: usize,
    /// Directories searched for `kustomize`, `kubectl` and `helm` before `PATH`.
    pub tool_dirs: Vec<PathBuf>,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox {
            timeout: Duration::from_secs(60),
            max_output_bytes: 64 * 1024 * 1024,
            tool_dirs: Vec::new(),
        }
    }
}

/// Why rendering failed. None is retryable except [`RenderError::TimedOut`]
/// (a loaded machine may finish next time).
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("{renderer}: {message}")]
    Failed { renderer: String, message: String },
    #[error("{renderer}: timed out after {after:?}")]
    TimedOut { renderer: String, after: Duration },
    #[error("{renderer}: output exceeds {limit} bytes")]
    OutputTooLarge { renderer: String, limit: usize },
    #[error("{renderer}: none of {tried} is installed (looked in PATH)")]
    NotInstalled { renderer: String, tried: String },
    #[error("{path}: {reason}")]
    PathEscape { path: String, reason: String },
}

impl RenderError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, RenderError::TimedOut { .. })
    }
}

/// Renders the application at `path` (`/`-separated, relative to the
/// repository root) of the repository snapshot `repository`.
pub fn render(
    renderer: &Renderer,
    repository: &Files,
    path: &str,
    sandbox: &Sandbox,
) -> Result<Vec<Manifest>, RenderError> {
    let path = path.trim_matches('/');
    check_relative("path", path)?;
    let manifests = match renderer {
        Renderer::Directory(options) => render_files(&repository.subdir(path), path, options)?,
        Renderer::Jsonnet(options) => jsonnet::render(repository, path, options)?,
        Renderer::Kustomize(_) => {
            let (program, mut args) = if let Some(kustomize) = find_program("kustomize", sandbox) {
                (kustomize, vec!["build".to_string()])
            } else if let Some(kubectl) = find_program("kubectl", sandbox) {
                (kubectl, vec!["kustomize".to_string()])
            } else {
                return Err(RenderError::NotInstalled {
                    renderer: "kustomize".into(),
                    tried: "`kustomize` and `kubectl` (kubectl kustomize)".into(),
                });
            };
            args.push(".".into());
            run_binary(
                "kustomize",
                repository,
                path,
                &program,
                &args,
                None,
                sandbox,
            )?
        }
        Renderer::Helm(options) => {
            let program =
                find_program("helm", sandbox).ok_or_else(|| RenderError::NotInstalled {
                    renderer: "helm".into(),
                    tried: "`helm`".into(),
                })?;
            let args = helm_args(options, path)?;
            let values = (!options.values.is_empty()).then_some(options.values.as_str());
            run_binary("helm", repository, path, &program, &args, values, sandbox)?
        }
    };
    check_duplicates(&manifests)?;
    Ok(manifests)
}

fn helm_args(options: &HelmOptions, path: &str) -> Result<Vec<String>, RenderError> {
    let release = if options.release_name.is_empty() {
        path.rsplit('/')
            .next()
            .filter(|s| !s.is_empty())
            .unwrap_or("release")
    } else {
        &options.release_name
    };
    let mut args = vec!["template".to_string(), release.to_string(), ".".into()];
    if !options.namespace.is_empty() {
        args.extend(["--namespace".into(), options.namespace.clone()]);
    }
    for file in &options.value_files {
        let in_repo = Path::new(path).join(file);
        check_relative("valueFiles", &in_repo.to_string_lossy())?;
        args.extend(["--values".into(), file.clone()]);
    }
    if !options.values.is_empty() {
        args.extend(["--values".into(), INLINE_VALUES.into()]);
    }
    Ok(args)
}

/// Inline Helm values are fed on standard input, so nothing is written
/// next to the chart.
const INLINE_VALUES: &str = "/dev/stdin";

fn run_binary(
    renderer: &str,
    repository: &Files,
    path: &str,
    program: &Path,
    args: &[String],
    inline_values: Option<&str>,
    sandbox: &Sandbox,
) -> Result<Vec<Manifest>, RenderError> {
    let temp = tempfile::tempdir().map_err(|e| RenderError::Failed {
        renderer: renderer.into(),
        message: format!("cannot create a temporary directory: {e}"),
    })?;
    let root = temp.path().join("repo");
    repository.materialize(&root)?;
    let dir = root.join(path);
    if !dir.is_dir() {
        return Err(RenderError::PathEscape {
            path: path.into(),
            reason: "is not a directory of the repository".into(),
        });
    }
    let program = program.to_string_lossy();
    let output = process::run(renderer, &dir, &program, args, inline_values, sandbox)?;
    let name = PathBuf::from(format!("{path} ({renderer} output)"));
    Ok(identify(parse_file(&name, &output)?)?)
}

/// Rejects absolute paths and `..` that leave the repository.
fn check_relative(what: &str, path: &str) -> Result<(), RenderError> {
    let mut depth = 0i32;
    for component in Path::new(path).components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => depth -= 1,
            Component::RootDir | Component::Prefix(_) => depth = -1,
        }
        if depth < 0 {
            return Err(RenderError::PathEscape {
                path: path.into(),
                reason: format!("{what} escapes the repository"),
            });
        }
    }
    Ok(())
}

fn find_program(name: &str, sandbox: &Sandbox) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    sandbox
        .tool_dirs
        .iter()
        .cloned()
        .chain(std::env::split_paths(&path))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_leave_the_repository_are_rejected() {
        assert!(check_relative("path", "apps/../web").is_ok());
        assert!(check_relative("path", "../other").is_err());
        assert!(check_relative("path", "/etc").is_err());
        let options = HelmOptions {
            value_files: vec!["../../../etc/passwd".into()],
            ..Default::default()
        };
        let error = helm_args(&options, "charts/web").unwrap_err().to_string();
        assert!(
            error.contains("valueFiles escapes the repository"),
            "{error}"
        );
    }
}
