//! An incident, driven through the real `tether` binary as an operator
//! would: `tether run` in the background, `tether drift` showing a manual
//! change and who made it, `tether break-glass open|list|show|close`
//! around an emergency change, against the real local control plane.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tether_testkit::TestNamespace;

fn tether(ns: &TestNamespace, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(args)
        .env("TETHER_KUBECONFIG", &ns.kubeconfig)
        .output()
        .expect("tether runs")
}

fn ok(ns: &TestNamespace, args: &[&str]) -> String {
    let output = tether(ns, args);
    assert!(
        output.status.success(),
        "tether {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Polls `check` every 200 ms for up to a minute.
fn until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `tether run` for one namespace; killed when dropped.
struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn git(dir: &std::path::Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_incident_through_the_cli_drift_then_break_glass_then_revert() {
    let ns = TestNamespace::create("cli-incident").await;
    let repo = std::env::temp_dir().join(format!("tether-cli-incident-{}", ns.name));
    let _ = std::fs::remove_dir_all(&repo);
    std::fs::create_dir_all(repo.join("app")).unwrap();
    std::fs::write(
        repo.join("app/web.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n",
    )
    .unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "web"]);

    let n = ns.name.as_str();
    ok(&ns, &["install", "-n", n]);
    let cache = std::env::temp_dir().join(format!("tether-cli-cache-{n}"));
    let _controller = Controller(
        Command::new(env!("CARGO_BIN_EXE_tether"))
            .args(["run", "--lease-namespace", n, "--watch-namespace", n])
            .args(["--resync-seconds", "5", "--identity", n, "--cache-dir"])
            .arg(&cache)
            .env("TETHER_KUBECONFIG", &ns.kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("tether run starts"),
    );
    let url = format!("file://{}", repo.display());
    ok(
        &ns,
        &[
            "app",
            "create",
            "shop",
            "-n",
            n,
            "--repo",
            &url,
            "--path",
            "app",
            "--dest-namespace",
            n,
        ],
    );
    until("Synced", || {
        let status: Value =
            serde_json::from_str(&ok(&ns, &["status", "shop", "-n", n, "-o", "json"])).ok()?;
        let text = status.to_string();
        text.contains("\"Synced\"").then_some(())
    });

    // A manual change: reverted, and `tether drift` says by whom.
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=5"]);
    let row = until("the scale in tether drift", || {
        // Exit code 1 while the drift is unresolved, 0 once healed.
        let output = tether(&ns, &["drift", "shop", "-n", n, "-o", "json"]);
        let rows: Value = serde_json::from_slice(&output.stdout).ok()?;
        rows.as_array()?
            .iter()
            .find(|r| r["field"]["path"] == "spec.replicas" && r["field"]["live"] == 5)
            .cloned()
    });
    assert_eq!(row["kind"], "Manual");
    assert_eq!(row["field"]["desired"], 2);
    assert_eq!(row["field"]["writer"]["manager"], "kubectl");
    let table = tether(&ns, &["drift", "shop", "-n", n]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.starts_with("APP  "), "{table}");
    assert!(
        table.contains("spec.replicas") && table.contains("Manual"),
        "{table}"
    );

    // Bad input: a window without a reason, a bad ttl, an unknown app.
    for args in [
        vec![
            "break-glass",
            "open",
            "shop",
            "-n",
            n,
            "--reason",
            " ",
            "--ttl",
            "1h",
        ],
        vec![
            "break-glass",
            "open",
            "shop",
            "-n",
            n,
            "--reason",
            "INC-9",
            "--ttl",
            "soon",
        ],
        vec![
            "break-glass",
            "open",
            "nope",
            "-n",
            n,
            "--reason",
            "INC-9",
            "--ttl",
            "1h",
        ],
    ] {
        let output = tether(&ns, &args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(!String::from_utf8_lossy(&output.stderr).trim().is_empty());
    }
    assert!(!ok(&ns, &["break-glass", "list", "-n", n]).contains("shop-"));

    // The incident: a window on the Deployment, an emergency image change.
    let opened = ok(
        &ns,
        &[
            "break-glass",
            "open",
            "shop",
            "-n",
            n,
            "--resource",
            "Deployment/web",
            "--reason",
            "INC-42: roll back the image",
            "--ttl",
            "10m",
        ],
    );
    let window = opened
        .split_whitespace()
        .nth(1)
        .and_then(|w| w.split('/').nth(1))
        .unwrap()
        .to_string();
    ns.kubectl_ok(&["set", "image", "deployment/web", "web=nginx:1.26"]);
    let shown = until("the change in break-glass show", || {
        let shown = ok(&ns, &["break-glass", "show", &window, "-n", n]);
        shown.contains("nginx:1.26").then_some(shown)
    });
    assert!(shown.contains("INC-42: roll back the image"), "{shown}");
    assert!(shown.contains("by kubectl-set"), "{shown}");
    assert!(
        shown.contains("audit log: 1 record(s), chain intact"),
        "{shown}"
    );
    let list = ok(&ns, &["break-glass", "list", "-n", n]);
    assert!(list.contains(&window) && list.contains("Open"), "{list}");
    // Unresolved drift: exit code 1.
    let drift = tether(&ns, &["drift", "shop", "-n", n]);
    assert_eq!(drift.status.code(), Some(1));
    let drift = String::from_utf8_lossy(&drift.stdout);
    assert!(
        drift.contains("Emergency") && drift.contains("Reported"),
        "{drift}"
    );

    // Close with revert: self-heal takes the image back.
    ok(
        &ns,
        &[
            "break-glass",
            "close",
            "shop",
            "-n",
            n,
            "--resolve",
            "revert",
        ],
    );
    until("the image reverted", || {
        let output = ns.kubectl(&[
            "get",
            "deployment/web",
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ]);
        (String::from_utf8_lossy(&output.stdout) == "nginx:1.27").then_some(())
    });
    let list = ok(&ns, &["break-glass", "list", "-n", n]);
    assert!(list.contains("Closed"), "{list}");
    // A closed window cannot be closed again.
    let again = tether(
        &ns,
        &[
            "break-glass",
            "close",
            &window,
            "-n",
            n,
            "--resolve",
            "revert",
        ],
    );
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr)
            .contains("is Closed: only an open window can be closed"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}
