//! Shared by the CLI's end-to-end tests: the real `tether` binary, a real
//! Git repository (file://), and processes that never outlive a test.
//!
//! Each test binary compiles this module on its own and uses only part of
//! it, so unused items are expected here.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use tether_testkit::TestNamespace;

pub const PATIENCE: Duration = Duration::from_secs(60);

/// `tether ARGS` against the test's control plane.
pub fn tether_command(ns: &TestNamespace, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tether"));
    command.args(args).env("TETHER_KUBECONFIG", &ns.kubeconfig);
    command
}

/// Runs `tether ARGS` to the end.
pub fn tether(ns: &TestNamespace, args: &[&str]) -> Output {
    tether_command(ns, args).output().expect("tether runs")
}

/// Stdout and stderr, as one text.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A child process killed (SIGKILL) and reaped when dropped, so a failing
/// test leaves nothing running.
pub struct Running {
    pub child: Child,
}

impl Running {
    pub fn spawn(mut command: Command) -> Running {
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the process starts");
        Running { child }
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A Git repository in a temporary directory, removed when dropped.
pub struct Repo {
    pub dir: PathBuf,
}

impl Repo {
    pub fn new(name: &str) -> Repo {
        let dir = std::env::temp_dir().join(format!("tether-cli-repo-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let repo = Repo { dir };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    pub fn url(&self) -> String {
        format!("file://{}", self.dir.display())
    }

    pub fn git(&self, args: &[&str]) -> String {
        let output = Command::new("git")
            .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap().trim().to_string()
    }

    /// Writes `files` and commits them; returns the commit id.
    pub fn commit(&self, files: &[(&str, String)], message: &str) -> String {
        for (path, text) in files {
            let path = self.dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A ConfigMap `name` with `greeting`, as YAML.
pub fn config_map(name: &str, greeting: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  greeting: \"{greeting}\"\n"
    )
}

/// Application `shop` in `ns` for `repo`'s `app/` directory, as YAML.
pub fn application(ns: &TestNamespace, repo: &Repo, sync_policy: &str) -> String {
    format!(
        "apiVersion: tether.dev/v1alpha1\nkind: Application\nmetadata:\n  name: shop\n  namespace: {ns}\nspec:\n  source:\n    repoURL: {url}\n    path: app\n  destination:\n    namespace: {ns}\n  syncPolicy: {sync_policy}\n",
        ns = ns.name,
        url = repo.url()
    )
}

/// Polls `check` until it returns a value, for at most [`PATIENCE`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
