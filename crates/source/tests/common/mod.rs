//! Shared by the source crate's tests. The real components they run (the
//! `git` CLI, `git daemon`, repositories, `git http-backend` behind a tiny
//! CGI server and `sshd`, all on 127.0.0.1) come from the test kit.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use tether_testkit::run_ok;

pub fn config_map(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: shop\ndata:\n  key: value\n"
    )
}

/// The folder holding `helm` (on `PATH`, or where `scripts/setup.sh` or
/// `go install` put it); `None`, saying the test is skipped, without one.
pub fn helm() -> Option<PathBuf> {
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_default());
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .chain([home.join(".cache/tether/bin"), home.join("go/bin")])
        .find(|dir| dir.join("helm").is_file());
    if found.is_none() {
        eprintln!(
            "skipped: helm is not installed (scripts/setup.sh builds it into ~/.cache/tether/bin)"
        );
    }
    found
}

/// A copy of chart fixture `name` (`tests/fixtures/charts/NAME`) at
/// `root/chart`.
pub fn chart(name: &str, root: &Path) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/charts")
        .join(name);
    let chart = root.join("chart");
    run_ok(Command::new("cp").arg("-R").arg(fixture).arg(&chart));
    chart
}
