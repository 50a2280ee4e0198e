//! core must stay pure: no async runtime, Kubernetes client or I/O crate may
//! enter its dependency tree, directly or through another crate.

use std::process::Command;

const FORBIDDEN: &[&str] = &[
    "tokio",
    "kube",
    "kube-client",
    "kube-runtime",
    "k8s-openapi",
    "hyper",
    "reqwest",
    "gix",
    "mio",
    "async-std",
    "axum",
    "tower",
];

#[test]
fn core_depends_on_no_runtime_client_or_io_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "--package",
            "tether-core",
            "--edges",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8(output.stdout).unwrap();
    let offenders: Vec<&str> = tree
        .lines()
        .filter(|line| {
            let name = line.split_whitespace().next().unwrap_or("");
            FORBIDDEN.contains(&name)
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "tether-core must stay pure, but depends on: {offenders:?}"
    );
}
