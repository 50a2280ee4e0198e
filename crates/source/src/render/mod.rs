//! Renderers: turning the files at an application's path into objects.
//!
//! Plain directories are rendered in-process from the object store's
//! snapshot. Kustomize, Helm and Jsonnet run as child processes in a private
//! temporary copy of the repository whose symlinks have all been followed
//! and found to stay inside it; by default the child sees nothing else (see
//! [`process`]). Jsonnet runs Tether's own evaluator in a child process
//! (`tether __render-jsonnet`, see [`jsonnet`]) so that a hostile program
//! meets a memory limit rather than the controller's heap. Every renderer's
//! output is checked the same way: identities, duplicates, the [`Limits`]
//! of one render, and all-or-nothing.

mod helm;
mod helm_cluster_calls;
mod jsonnet;
mod kustomize;
mod process;
mod stderr;

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

pub use jsonnet::{JSONNET_CHILD, jsonnet_child};

use crate::directory::{check_duplicates, render_files};
use crate::files::Files;
pub use crate::limits::Limits;
use crate::limits::{Budget, size};
use crate::manifest::{Manifest, ManifestError, Origin, identify, parse_output};
use crate::spec::Renderer;
pub use tether_core::capabilities::Capabilities;

/// How renderers run: their bounds, and where to find them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    pub timeout: Duration,
    /// The most a renderer process may write to its standard output.
    pub max_output_bytes: usize,
    /// Directories searched for `kustomize`, `kubectl`, `helm` and `bwrap`
    /// before `PATH`.
    pub tool_dirs: Vec<PathBuf>,
    /// Whether renderer processes run in a bubblewrap filesystem sandbox.
    pub mode: SandboxMode,
    /// The executable that evaluates Jsonnet as `PROGRAM __render-jsonnet`:
    /// the `tether` binary itself, or the source crate's `tether-render`.
    /// The default looks for either next to the current executable or in
    /// its parent directory (where Cargo puts binaries, one level above
    /// test executables).
    pub render_program: PathBuf,
    /// The address-space limit of the Jsonnet child process.
    pub max_memory_bytes: usize,
    /// Sizes and counts that one render may not exceed.
    pub limits: Limits,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox {
            timeout: Duration::from_secs(60),
            max_output_bytes: 64 * 1024 * 1024,
            tool_dirs: Vec::new(),
            mode: SandboxMode::default(),
            render_program: default_render_program(),
            max_memory_bytes: 1024 * 1024 * 1024,
            limits: Limits::default(),
        }
    }
}

tether_core::vocabulary! {
    /// Whether renderer processes are confined with bubblewrap.
    #[derive(Default)]
    pub enum SandboxMode("render sandbox") {
        /// Confine them, and refuse to render where `bwrap` does not work.
        #[default]
        Required = "required",
        /// Run them directly (no network still): an explicit opt-out, e.g.
        /// on a laptop without bubblewrap.
        Off = "off",
    }
}

/// Whether renderers can run as `sandbox` asks: an error when the sandbox
/// is required and bubblewrap is missing or does not work here. Rendering
/// checks this itself; a controller calls it at startup to warn early.
pub fn probe_sandbox(sandbox: &Sandbox) -> Result<(), RenderError> {
    match sandbox.mode {
        SandboxMode::Off => Ok(()),
        SandboxMode::Required => process::bubblewrap(sandbox).map(|_| ()).map_err(|reason| {
            RenderError::SandboxUnavailable {
                renderer: "renderers".into(),
                reason,
            }
        }),
    }
}

/// `tether-render` or `tether` next to the current executable or one
/// directory up; `tether-render` (which will not be found) otherwise.
fn default_render_program() -> PathBuf {
    let exe = std::env::current_exe().ok();
    let dirs = exe.iter().flat_map(|exe| exe.ancestors().skip(1).take(2));
    dirs.flat_map(|dir| ["tether-render", "tether"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from("tether-render"))
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
    #[error("{renderer}: exceeded the memory limit of {}", size(*limit))]
    MemoryLimit { renderer: String, limit: usize },
    #[error("{renderer}: none of {tried} is installed (looked in PATH)")]
    NotInstalled { renderer: String, tried: String },
    #[error(
        "{renderer}: the render sandbox needs bubblewrap: {reason}; install it \
         (Debian: apt-get install bubblewrap) or turn the sandbox off with `--render-sandbox off`"
    )]
    SandboxUnavailable { renderer: String, reason: String },
    #[error("{path}: {reason}")]
    PathEscape { path: String, reason: String },
}

impl RenderError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, RenderError::TimedOut { .. })
    }
}

/// Renders the application at `path` (`/`-separated, relative to the
/// repository root) of the repository snapshot `repository`, for a cluster
/// with `capabilities` (which only Helm reads; [`Capabilities::default`]
/// when no cluster is known).
pub fn render(
    renderer: &Renderer,
    repository: &Files,
    path: &str,
    sandbox: &Sandbox,
    capabilities: &Capabilities,
) -> Result<Vec<Manifest>, RenderError> {
    let path = path.trim_matches('/');
    check_relative("path", path)?;
    let mut budget = Budget::new(sandbox.limits.clone());
    let manifests = match renderer {
        Renderer::Directory(options) if path.is_empty() => {
            render_files(repository, path, options, &mut budget)?
        }
        Renderer::Directory(options) => {
            render_files(&repository.subdir(path), path, options, &mut budget)?
        }
        Renderer::Jsonnet(options) => {
            jsonnet::render(repository, path, options, sandbox, &mut budget)?
        }
        Renderer::Kustomize(_) => {
            kustomize::check(repository, path)?;
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
            let binary = Binary {
                renderer: "kustomize",
                program: &program,
                args: &args,
                inline_values: None,
            };
            run_binary(&binary, repository, path, sandbox, &mut budget)?
        }
        Renderer::Helm(options) => {
            let target = helm::Target {
                repository,
                path,
                capabilities,
            };
            helm::render(options, &target, sandbox, &mut budget)?
        }
    };
    check_duplicates(&manifests)?;
    Ok(manifests)
}

/// A renderer binary and how to call it.
struct Binary<'a> {
    renderer: &'a str,
    program: &'a Path,
    args: &'a [String],
    inline_values: Option<&'a str>,
}

fn run_binary(
    binary: &Binary<'_>,
    repository: &Files,
    path: &str,
    sandbox: &Sandbox,
    budget: &mut Budget,
) -> Result<Vec<Manifest>, RenderError> {
    let renderer = binary.renderer;
    let (_temp, root) = materialize(renderer, repository)?;
    let dir = root.join(path);
    if !dir.is_dir() {
        return Err(RenderError::PathEscape {
            path: path.into(),
            reason: "is not a directory of the repository".into(),
        });
    }
    let run = process::Run {
        renderer,
        root: &root,
        dir: &dir,
        program: binary.program,
        args: binary.args,
        input: binary.inline_values,
        memory_limited: false,
    };
    let output = process::run(&run, sandbox)?;
    Ok(read_output(renderer, path, &output, budget)?)
}

/// What `renderer` (`kustomize`, `helm`, …) printed for the app at `path`,
/// read as the objects it declares: one YAML stream held to the rest of
/// `budget`, each object named after where it came from.
pub fn read_output(
    renderer: &str,
    path: &str,
    output: &[u8],
    budget: &mut Budget,
) -> Result<Vec<Manifest>, ManifestError> {
    let name = PathBuf::from(format!("{path} ({renderer} output)"));
    let mut objects = parse_output(&name, output, budget)?;
    if renderer == "helm" {
        helm_sources(&mut objects, output, path);
    }
    identify(objects)
}

/// Names each object of `helm template`'s output after the template it
/// came from (helm's `# Source: CHART/templates/x.yaml` comment), as a
/// path in the repository (`apps/web/templates/x.yaml`), so an error in a
/// rendered object points at a file someone can open. The output's line
/// is dropped: it is not a line of that file.
fn helm_sources(objects: &mut [(Origin, serde_json::Value)], output: &[u8], path: &str) {
    let text = String::from_utf8_lossy(output);
    let sources: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .filter_map(|(index, line)| Some((index + 1, line.strip_prefix("# Source: ")?.trim())))
        .collect();
    for (origin, _) in objects.iter_mut() {
        let Some((_, source)) = sources.iter().rev().find(|(line, _)| *line < origin.line) else {
            continue;
        };
        // The first component is the chart's name, not a directory.
        let in_chart = source.split_once('/').map_or(*source, |(_, rest)| rest);
        let file = if path.is_empty() {
            in_chart.to_string()
        } else {
            format!("{path}/{in_chart}")
        };
        origin.file = PathBuf::from(format!("{file} (helm output)"));
        origin.line = 0;
    }
}

/// Writes `repository` into a new private temporary directory, refusing
/// any symlink that leads out of it; returns the directory's guard and the
/// copy's root.
fn materialize(
    renderer: &str,
    repository: &Files,
) -> Result<(tempfile::TempDir, PathBuf), RenderError> {
    let temp = tempfile::tempdir().map_err(|e| RenderError::Failed {
        renderer: renderer.into(),
        message: format!("cannot create a temporary directory: {e}"),
    })?;
    let root = temp.path().join("repo");
    repository.materialize(&root)?;
    Ok((temp, root))
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
    }
}
