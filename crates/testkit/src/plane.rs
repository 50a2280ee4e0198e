//! Starting (or finding) the control plane the tests run against.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::Duration;

const START_TIMEOUT: Duration = Duration::from_secs(180);

/// A running control plane and the kubeconfig of its admin user.
pub struct ControlPlane {
    kubeconfig: PathBuf,
    dir: Option<PathBuf>,
    binary: Option<PathBuf>,
    // Held open for the life of the test process: kube-local stops when
    // this pipe closes.
    _stdin: Option<Mutex<ChildStdin>>,
    _child: Option<Mutex<Child>>,
}

impl ControlPlane {
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Writes a kubeconfig for a certificate user `user` in `groups`,
    /// signed by the control plane's CA. Only for a plane this process started.
    pub fn user_kubeconfig(&self, user: &str, groups: &[&str]) -> PathBuf {
        let (dir, binary) = self
            .dir
            .as_ref()
            .zip(self.binary.as_ref())
            .expect("user kubeconfigs need a control plane started by the test harness");
        let out = dir.join(format!("kubeconfig-{user}"));
        let mut command = Command::new(binary);
        command
            .args(["kubeconfig", "--dir"])
            .arg(dir)
            .args(["--user", user]);
        for group in groups {
            command.args(["--group", group]);
        }
        let status = command
            .arg("--out")
            .arg(&out)
            .status()
            .expect("kube-local runs");
        assert!(status.success(), "kube-local kubeconfig failed for {user}");
        out
    }
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root exists")
}

/// The control plane for this test process, started on first call.
pub fn control_plane() -> &'static ControlPlane {
    static PLANE: OnceLock<ControlPlane> = OnceLock::new();
    PLANE.get_or_init(|| match std::env::var_os("TETHER_TEST_KUBECONFIG") {
        Some(path) => ControlPlane {
            kubeconfig: path.into(),
            dir: None,
            binary: None,
            _stdin: None,
            _child: None,
        },
        None => start(),
    })
}

fn start() -> ControlPlane {
    let binary = build_kube_local();
    let dir = std::env::temp_dir().join(format!("tether-test-plane-{}", std::process::id()));
    let mut child = Command::new(&binary)
        .args(["up", "--controller-manager", "--fake-kubelet", "--dir"])
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|error| panic!("starting {}: {error}", binary.display()));
    let stdout = child.stdout.take().expect("piped stdout");
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(path) = line.strip_prefix("READY ") {
                let _ = ready_tx.send(PathBuf::from(path));
            }
        }
    });
    let kubeconfig = match ready_rx.recv_timeout(START_TIMEOUT) {
        Ok(path) => path,
        Err(_) => {
            let _ = child.kill();
            panic!(
                "kube-local did not print READY within {}s; logs in {}/logs",
                START_TIMEOUT.as_secs(),
                dir.display()
            );
        }
    };
    ControlPlane {
        kubeconfig,
        dir: Some(dir),
        binary: Some(binary),
        _stdin: child.stdin.take().map(Mutex::new),
        _child: Some(Mutex::new(child)),
    }
}

/// Builds (or finds in the cache) the kube-local binary.
fn build_kube_local() -> PathBuf {
    let script = repo_root().join("scripts/build-kube-local.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|error| panic!("running {}: {error}", script.display()));
    assert!(output.status.success(), "{} failed", script.display());
    PathBuf::from(String::from_utf8(output.stdout).expect("utf-8 path").trim())
}
