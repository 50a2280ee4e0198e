//! A real OpenSSH server on 127.0.0.1, configured entirely from a temporary
//! directory: its own host key, its own authorized_keys, no PAM, no
//! passwords. Whoever runs the tests logs in as themselves, with a key made
//! for the test.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use std::time::{Duration, Instant};

use crate::free_port;

/// Where Debian's `openssh-server` (installed by `scripts/setup.sh`) puts it;
/// sshd must be started by its absolute path.
const SSHD: &str = "/usr/sbin/sshd";

pub struct Sshd {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    /// The server's host key, as a known_hosts line for 127.0.0.1 on `port`.
    pub known_hosts: String,
}

/// A key pair made by `ssh-keygen`: the private key text and the public line.
pub struct KeyPair {
    pub private: String,
    pub public: String,
}

impl KeyPair {
    pub fn generate(dir: &Path, name: &str) -> KeyPair {
        let path = dir.join(name);
        let status = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
            .arg(&path)
            .status()
            .expect("ssh-keygen runs");
        assert!(status.success(), "ssh-keygen failed");
        KeyPair {
            private: std::fs::read_to_string(&path).unwrap(),
            public: std::fs::read_to_string(path.with_extension("pub")).unwrap(),
        }
    }
}

impl Sshd {
    /// Fails the test, saying how to install it, when sshd is missing: the
    /// SSH tests never skip.
    fn require_installed() {
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing (Debian: openssh-server, installed by scripts/setup.sh)"
        );
    }

    /// Starts sshd on a free port that accepts `authorized` public keys.
    pub fn start(authorized: &[&KeyPair]) -> Sshd {
        let started = Sshd::start_on(free_port(), authorized);
        started.unwrap_or_else(|log| panic!("sshd did not start:\n{log}"))
    }

    /// Port 22, which scp-like URLs (`user@host:path`) cannot change; `None`
    /// when it is taken or this process may not bind it.
    pub fn start_on_port_22(authorized: &[&KeyPair]) -> Option<Sshd> {
        TcpListener::bind("127.0.0.1:22").ok()?;
        Sshd::start_on(22, authorized).ok()
    }

    /// The running server, or what it logged before it exited: another
    /// process may take the port between our check and sshd's bind, and
    /// then a connection would reach that other server.
    fn start_on(port: u16, authorized: &[&KeyPair]) -> Result<Sshd, String> {
        Sshd::require_installed();
        let dir = tempfile::tempdir().unwrap();
        let host = KeyPair::generate(dir.path(), "host_key");
        let authorized_keys: String = authorized.iter().map(|key| key.public.as_str()).collect();
        std::fs::write(dir.path().join("authorized_keys"), authorized_keys).unwrap();
        let config = dir.path().join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "ListenAddress 127.0.0.1\nPort {port}\nHostKey {dir}/host_key\nPidFile none\n\
                 AuthorizedKeysFile {dir}/authorized_keys\nAuthenticationMethods publickey\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 PermitRootLogin prohibit-password\nStrictModes no\nAcceptEnv GIT_PROTOCOL\n\
                 LogLevel VERBOSE\n",
                dir = dir.path().display()
            ),
        )
        .unwrap();
        if running_as_root() {
            // sshd started by root insists on its privilege separation
            // directory, which boots without systemd may not have created.
            std::fs::create_dir_all("/run/sshd").unwrap();
        }
        let log = std::fs::File::create(dir.path().join("sshd.log")).unwrap();
        let mut child = Command::new(SSHD)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("sshd starts");
        let log = || std::fs::read_to_string(dir.path().join("sshd.log")).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !log().contains(&format!("Server listening on 127.0.0.1 port {port}")) {
            if child.try_wait().unwrap().is_some() || Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let host_key = host.public.split_whitespace().take(2).collect::<Vec<_>>();
        let known_hosts = match port {
            22 => format!("127.0.0.1 {}\n", host_key.join(" ")),
            port => format!("[127.0.0.1]:{port} {}\n", host_key.join(" ")),
        };
        Ok(Sshd {
            child,
            port,
            dir,
            known_hosts,
        })
    }

    /// The user the tests log in as: whoever runs them.
    pub fn user() -> String {
        let output = Command::new("id").arg("-un").output().unwrap();
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// `ssh://user@127.0.0.1:port/abs/path`.
    pub fn url(&self, repository: &Path) -> String {
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            Sshd::user(),
            self.port,
            repository.display()
        )
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("sshd.log")
    }
}

fn running_as_root() -> bool {
    Sshd::user() == "root"
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
