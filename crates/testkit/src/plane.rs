//! Starting (or finding) a local control plane: kube-local, the one the
//! tests share and the one the benchmark measures.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::Duration;

use crate::run::run_ok;

const START_TIMEOUT: Duration = Duration::from_secs(180);

/// How to start kube-local.
#[derive(Clone, Debug, Default)]
pub struct Launch {
    /// Run kube-controller-manager and the fake kubelet too.
    pub controller_manager: bool,
    /// Write the API server's audit log (JSON lines) to this file.
    pub audit_log: Option<PathBuf>,
    /// Show kube-local's stderr (else it is dropped).
    pub show_stderr: bool,
    /// Really run the pods whose images are all in this list, each image
    /// as the host program beside it (`kube-local up --exec-image
    /// IMAGE=PATH`; needs `controller_manager`, which brings the kubelet).
    pub exec_images: Vec<(String, PathBuf)>,
}

/// A running control plane and the kubeconfig of its admin user. One this
/// process started stops when dropped, or when the process ends however it
/// ends: kube-local watches its stdin, and the kernel closes that pipe.
pub struct ControlPlane {
    kubeconfig: PathBuf,
    started: Option<Started>,
}

struct Started {
    dir: PathBuf,
    binary: PathBuf,
    _stdin: Mutex<ChildStdin>,
    _child: Mutex<Child>,
    /// Held while kube-local issues a user's certificate: two tests asking
    /// for the same user at once would write `pki/user-NAME.crt` and
    /// `.key` over each other, and a kubeconfig could get one's
    /// certificate with the other's key (seen in CI: KeyMismatch).
    issuing: Mutex<()>,
}

impl ControlPlane {
    /// Builds (or finds in the cache) kube-local and starts it in `dir`;
    /// returns once it is ready.
    pub fn start(dir: &Path, launch: &Launch) -> ControlPlane {
        let binary = build_kube_local();
        let mut command = Command::new(&binary);
        command.args(["up", "--dir"]).arg(dir);
        if launch.controller_manager {
            command.args(["--controller-manager", "--fake-kubelet"]);
        }
        for (image, program) in &launch.exec_images {
            let mut flag = std::ffi::OsString::from(format!("{image}="));
            flag.push(program);
            command.arg("--exec-image").arg(flag);
        }
        if let Some(audit_log) = &launch.audit_log {
            command.arg("--audit-log").arg(audit_log);
        }
        let stderr = match launch.show_stderr {
            true => Stdio::inherit(),
            false => Stdio::null(),
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
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
        let Ok(kubeconfig) = ready_rx.recv_timeout(START_TIMEOUT) else {
            let _ = child.kill();
            panic!(
                "kube-local did not print READY within {}s; logs in {}/logs",
                START_TIMEOUT.as_secs(),
                dir.display()
            );
        };
        let stdin = child.stdin.take().expect("piped stdin");
        forget_discovery(&kubeconfig);
        ControlPlane {
            kubeconfig,
            started: Some(Started {
                dir: dir.to_path_buf(),
                binary,
                _stdin: Mutex::new(stdin),
                _child: Mutex::new(child),
                issuing: Mutex::new(()),
            }),
        }
    }

    /// The kubeconfig of the admin user.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Writes a kubeconfig for a certificate user `user` in `groups`,
    /// signed by the control plane's CA. Only for a plane this process started.
    pub fn user_kubeconfig(&self, user: &str, groups: &[&str]) -> PathBuf {
        let Started {
            dir,
            binary,
            issuing,
            ..
        } = self
            .started
            .as_ref()
            .expect("user kubeconfigs need a control plane started by this process");
        let _issuing = issuing.lock().unwrap_or_else(|e| e.into_inner());
        let out = dir.join(format!("kubeconfig-{user}"));
        let mut command = Command::new(binary);
        command
            .args(["kubeconfig", "--dir"])
            .arg(dir)
            .args(["--user", user]);
        for group in groups {
            command.args(["--group", group]);
        }
        run_ok(command.arg("--out").arg(&out));
        out
    }
}

/// Drops kubectl's discovery cache of the server `kubeconfig` names.
/// kubectl keeps one per host and port (`~/.kube/cache/discovery/
/// 127.0.0.1_PORT`, for hours), and a plane may get the port of an earlier
/// one: its cache would still list that plane's kinds, so `kubectl patch
/// application/shop` could mean an `applications.argoproj.io` that an
/// earlier plane had and this one has not (NotFound, seen in CI).
fn forget_discovery(kubeconfig: &Path) {
    let Ok(text) = std::fs::read_to_string(kubeconfig) else {
        return;
    };
    let cache = std::env::var_os("KUBECACHEDIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".kube/cache")));
    let servers = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix("server:"))
        .map(|url| {
            url.trim()
                .trim_start_matches("https://")
                .trim_start_matches("http://")
        });
    for server in servers {
        if let Some(cache) = &cache {
            let _ = std::fs::remove_dir_all(cache.join("discovery").join(server.replace(':', "_")));
        }
    }
}

/// A component of the local control plane that can be restarted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    /// kube-apiserver: same port, same etcd.
    ApiServer,
    /// etcd: same data directory, same ports.
    Etcd,
}

impl Component {
    fn signal(self) -> &'static str {
        match self {
            Component::ApiServer => "-USR1",
            Component::Etcd => "-USR2",
        }
    }
}

impl ControlPlane {
    /// Stops `component` and starts it again with the same data and ports
    /// (`kube-local up` does so on SIGUSR1/SIGUSR2), as a real restart
    /// would; returns once the API server is ready again. Only for a plane
    /// this process started.
    pub async fn restart(&self, component: Component) {
        let Started { dir, _child, .. } = self
            .started
            .as_ref()
            .expect("restarts need a control plane started by this process");
        let record = dir.join("restarts");
        let count = |record: &Path| {
            std::fs::read_to_string(record)
                .map(|text| text.lines().count())
                .unwrap_or(0)
        };
        let before = count(&record);
        let pid = _child.lock().expect("lock").id();
        run_ok(Command::new("kill").args([component.signal(), &pid.to_string()]));
        let deadline = std::time::Instant::now() + START_TIMEOUT;
        while count(&record) == before {
            assert!(
                std::time::Instant::now() < deadline,
                "kube-local did not restart {component:?} within {}s; logs in {}/logs",
                START_TIMEOUT.as_secs(),
                dir.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl ControlPlane {
    /// Stops `component` and keeps it down for `down` before starting it
    /// again (see [`ControlPlane::restart`]); returns at once, with what
    /// [`ControlPlane::wait_restarted`] waits for.
    pub fn outage(&self, component: Component, down: Duration) -> usize {
        let Started { dir, _child, .. } = self
            .started
            .as_ref()
            .expect("outages need a control plane started by this process");
        let before = restarts(dir);
        let name = match component {
            Component::ApiServer => "apiserver",
            Component::Etcd => "etcd",
        };
        std::fs::write(
            dir.join(format!("down-{name}")),
            format!("{}ms", down.as_millis()),
        )
        .expect("writing the outage file");
        let pid = _child.lock().expect("lock").id();
        run_ok(Command::new("kill").args([component.signal(), &pid.to_string()]));
        before
    }

    /// Waits until the restart after `before` restarts is done and the
    /// API server ready again.
    pub async fn wait_restarted(&self, before: usize) {
        let Started { dir, .. } = self.started.as_ref().expect("a started plane");
        let deadline = std::time::Instant::now() + START_TIMEOUT * 2;
        while restarts(dir) == before {
            assert!(
                std::time::Instant::now() < deadline,
                "kube-local did not come back; logs in {}/logs",
                dir.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// How many restarts kube-local in `dir` recorded.
fn restarts(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("restarts"))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

/// The repository's root directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root exists")
}

/// The control plane for this test process, started on first call (with
/// the controller-manager and the fake kubelet), or the one
/// `TETHER_TEST_KUBECONFIG` names.
pub fn control_plane() -> &'static ControlPlane {
    static PLANE: OnceLock<ControlPlane> = OnceLock::new();
    PLANE.get_or_init(|| match std::env::var_os("TETHER_TEST_KUBECONFIG") {
        Some(path) => ControlPlane {
            kubeconfig: path.into(),
            started: None,
        },
        None => ControlPlane::start(
            &std::env::temp_dir().join(format!("tether-test-plane-{}", std::process::id())),
            &Launch {
                controller_manager: true,
                show_stderr: true,
                ..Launch::default()
            },
        ),
    })
}

/// Builds (or finds in the cache) the kube-local binary.
fn build_kube_local() -> PathBuf {
    let script = repo_root().join("scripts/build-kube-local.sh");
    let mut command = Command::new("bash");
    command.arg(&script).stderr(Stdio::inherit());
    PathBuf::from(run_ok(&mut command).trim())
}
