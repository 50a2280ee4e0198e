//! Real components for the tests: the `git` CLI, `git daemon`, and (from
//! the test kit) `git http-backend` behind a tiny CGI server and `sshd`,
//! all on 127.0.0.1. Servers are killed when their handle drops.
#![allow(dead_code)]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tether_testkit::git_server::free_port;

/// Runs `git` with a clean, fixed identity and no user config.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = git_command(dir, args).output().expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

pub fn git_command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("git");
    command
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com");
    command
}

/// A work repository that tests commit to, with a bare copy to serve.
pub struct Repo {
    pub dir: tempfile::TempDir,
}

impl Repo {
    pub fn new() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q", "-b", "main", "work"]);
        Repo { dir }
    }

    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    pub fn write(&self, path: &str, text: &str) -> &Repo {
        let file = self.work().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
        self
    }

    pub fn commit(&self, message: &str) -> String {
        git(&self.work(), &["add", "-A"]);
        git(
            &self.work(),
            &["commit", "-q", "--allow-empty", "-m", message],
        );
        git(&self.work(), &["rev-parse", "HEAD"])
    }

    /// Publishes the work repository as `served/<name>.git` and returns the
    /// directory that holds `served`.
    pub fn publish(&self, name: &str) -> PathBuf {
        let served = self.dir.path().join("served");
        let bare = served.join(format!("{name}.git"));
        if bare.exists() {
            git(
                &self.work(),
                &[
                    "push",
                    "-q",
                    "--force",
                    "--tags",
                    bare.to_str().unwrap(),
                    "main",
                ],
            );
        } else {
            std::fs::create_dir_all(&served).unwrap();
            git(
                self.dir.path(),
                &["clone", "-q", "--bare", "work", bare.to_str().unwrap()],
            );
        }
        served
    }

    pub fn file_url(&self, name: &str) -> String {
        format!("file://{}/{name}.git", self.publish(name).display())
    }
}

pub fn config_map(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: shop\ndata:\n  key: value\n"
    )
}

fn wait_for(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "server on port {port} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `git daemon` serving `base` on a random loopback port.
pub struct GitDaemon {
    child: Child,
    pub port: u16,
}

impl GitDaemon {
    pub fn start(base: &Path) -> GitDaemon {
        let port = free_port();
        let child = Command::new("git")
            .args([
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", base.display()),
                &base.display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("git daemon starts");
        wait_for(port);
        GitDaemon { child, port }
    }

    pub fn url(&self, name: &str) -> String {
        format!("git://127.0.0.1:{}/{name}.git", self.port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
