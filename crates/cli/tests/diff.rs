//! `tether diff` and `tether sync --path` driven like an operator would,
//! against the real local control plane.

mod support;

use support::{tether, tether_ok, text};

use tether_testkit::{TestNamespace, write_file};

/// Deployment `web`, two replicas.
const WEB: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n";

/// Secret `creds`, whose value must never be printed.
const SECRET: &str =
    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: hunter2\n";

#[tokio::test]
async fn diff_exits_one_on_drift_and_zero_when_converged() {
    let ns = TestNamespace::create("cli-diff").await;
    let dir = std::env::temp_dir().join(format!("tether-cli-diff-{}", ns.name));
    write_file(&dir, "web.yaml", WEB);
    write_file(&dir, "secret.yaml", SECRET);
    let path = dir.to_str().unwrap();

    let before = tether(&ns, &["diff", "--path", path, "--namespace", &ns.name]);
    assert_eq!(before.status.code(), Some(1), "{}", text(&before));
    assert!(
        !text(&before).contains("hunter2"),
        "secret values are never printed"
    );

    tether_ok(&ns, &["sync", "--path", path, "--namespace", &ns.name]);
    let converged = tether(&ns, &["diff", "--path", path, "--namespace", &ns.name]);
    assert_eq!(converged.status.code(), Some(0), "{}", text(&converged));

    let scale = ns.kubectl(&["scale", "deployment/web", "--replicas=5"]);
    assert!(scale.status.success());
    let drifted = tether(&ns, &["diff", "--path", path, "--namespace", &ns.name]);
    assert_eq!(drifted.status.code(), Some(1), "{}", text(&drifted));
    let shown = text(&drifted);
    assert!(
        shown.contains(&format!("--- Deployment {}/web (live)", ns.name)),
        "{shown}"
    );
    assert!(
        shown.contains("-  replicas: 5") && shown.contains("+  replicas: 2"),
        "{shown}"
    );

    let bad = tether(
        &ns,
        &[
            "diff",
            "--path",
            "/nonexistent/dir",
            "--namespace",
            &ns.name,
        ],
    );
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
    let _ = std::fs::remove_dir_all(&dir);
}
