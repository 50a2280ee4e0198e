//! Where tests find the external tools Tether renders with (`helm`,
//! `kustomize`): on `PATH`, or where `scripts/go-tool.sh` puts helm
//! (`~/.cache/tether/image-bin/helm-VERSION`) or `go install` (`~/go/bin`)
//! puts them. Not the kustomize it builds for the image, so that a test
//! renders with the same kustomize whether or not the image's was built
//! yet (`kubectl kustomize` without one on `PATH`); a test that wants it
//! asks [`built_kustomize_dir`].

use std::path::PathBuf;

/// The folders searched for a tool, in order: `PATH`, then the helm
/// folders of `~/.cache/tether/image-bin` (or under `XDG_CACHE_HOME`) and
/// `~/go/bin`.
pub fn tool_dirs() -> Vec<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(built("helm"))
        .chain([home().join("go/bin")])
        .collect()
}

/// The folder where `scripts/go-tool.sh kustomize` built the image's
/// kustomize, if it did.
pub fn built_kustomize_dir() -> Option<PathBuf> {
    built("kustomize").pop()
}

/// The folders `scripts/go-tool.sh` built `tool` into
/// (`~/.cache/tether/image-bin/TOOL-VERSION`, or under `XDG_CACHE_HOME`)
/// that hold it, oldest version first.
fn built(tool: &str) -> Vec<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home().join(".cache"));
    let prefix = format!("{tool}-");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(cache.join("tether/image-bin"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&prefix))
        .map(|entry| entry.path())
        .filter(|dir| dir.join(tool).is_file())
        .collect();
    dirs.sort();
    dirs
}

fn home() -> PathBuf {
    PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
}

/// The folder holding `helm`; `None`, saying the test is skipped, without
/// one.
pub fn helm_dir() -> Option<PathBuf> {
    let found = tool_dirs()
        .into_iter()
        .find(|dir| dir.join("helm").is_file());
    if found.is_none() {
        skipped("helm is not installed (scripts/setup.sh builds it with scripts/go-tool.sh)");
    }
    found
}

/// Says a test is skipped for want of `what`, on a developer's machine
/// that lacks it. Under CI (`CI` set), where `scripts/test.sh` provides
/// every tool, a skip would hide a test that never ran: it fails instead.
pub fn skipped(what: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "{what}: under CI every test runs"
    );
    eprintln!("skipped: {what}");
}
