//! Where tests find the external tools Tether renders with (`helm`,
//! `kustomize`): on `PATH`, or where `scripts/setup.sh`
//! (`~/.cache/tether/bin`) or `go install` (`~/go/bin`) put them.

use std::path::PathBuf;

/// The folders searched for a tool, in order: `PATH`, then
/// `~/.cache/tether/bin` and `~/go/bin`.
pub fn tool_dirs() -> Vec<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([home.join(".cache/tether/bin"), home.join("go/bin")])
        .collect()
}

/// The folder holding `helm`; `None`, saying the test is skipped, without
/// one.
pub fn helm_dir() -> Option<PathBuf> {
    let found = tool_dirs()
        .into_iter()
        .find(|dir| dir.join("helm").is_file());
    if found.is_none() {
        eprintln!(
            "skipped: helm is not installed (scripts/setup.sh builds it into ~/.cache/tether/bin)"
        );
    }
    found
}
