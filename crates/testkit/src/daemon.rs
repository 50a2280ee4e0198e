//! `git daemon` on a random loopback port, killed when dropped.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `git daemon` serving the repositories below a directory (e.g. what
/// [`crate::Repo::publish`] returns) over `git://127.0.0.1:PORT/`.
pub struct GitDaemon {
    child: Child,
    pub port: u16,
    log: tempfile::NamedTempFile,
}

impl GitDaemon {
    pub fn start(base: &Path) -> GitDaemon {
        let port = free_port();
        let log = tempfile::NamedTempFile::new().expect("a log file");
        let child = Command::new("git")
            .args([
                "daemon",
                "--verbose",
                "--reuseaddr",
                "--export-all",
                "--listen=127.0.0.1",
            ])
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", base.display()))
            .arg(base)
            .stdout(Stdio::null())
            .stderr(log.reopen().expect("the log file"))
            .spawn()
            .expect("git daemon starts");
        wait_for(port);
        GitDaemon { child, port, log }
    }

    pub fn url(&self, name: &str) -> String {
        format!("git://127.0.0.1:{}/{name}.git", self.port)
    }

    /// Connections that asked for `upload-pack` so far (`--verbose` logs one
    /// `Request upload-pack` line for each).
    pub fn upload_pack_requests(&self) -> usize {
        std::fs::read_to_string(self.log.path())
            .unwrap_or_default()
            .matches("Request upload-pack")
            .count()
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nothing listens on (at the time of asking).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Waits (up to 10 s) until something accepts connections on `port`.
pub fn wait_for(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "server on port {port} did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
