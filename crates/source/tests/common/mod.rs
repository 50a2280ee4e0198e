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
