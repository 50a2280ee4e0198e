//! The control plane the benchmark runs against: kube-local with an audit
//! log, and one client-certificate user per actor so the audit log tells
//! Tether's requests from kubectl's and from the benchmark's own.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

/// A running kube-local; it stops when this value is dropped (its stdin closes).
pub struct Plane {
    pub dir: PathBuf,
    pub admin: PathBuf,
    pub audit_log: PathBuf,
    binary: PathBuf,
    _stdin: ChildStdin,
    _child: Child,
}

impl Plane {
    /// Builds (or finds) kube-local and starts it in `dir`.
    pub fn start(root: &Path, dir: &Path, controller_manager: bool) -> anyhow::Result<Plane> {
        let output = Command::new("bash")
            .arg(root.join("scripts/build-kube-local.sh"))
            .stderr(Stdio::inherit())
            .output()
            .context("running scripts/build-kube-local.sh")?;
        if !output.status.success() {
            bail!("scripts/build-kube-local.sh failed");
        }
        let binary = PathBuf::from(String::from_utf8(output.stdout)?.trim());
        let audit_log = dir.join("audit.log");
        let mut command = Command::new(&binary);
        command.args(["up", "--dir"]).arg(dir);
        command.arg("--audit-log").arg(&audit_log);
        if controller_manager {
            command.args(["--controller-manager", "--fake-kubelet"]);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let stdout = child.stdout.take().expect("piped");
        let (ready_tx, ready_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(path) = line.strip_prefix("READY ") {
                    let _ = ready_tx.send(PathBuf::from(path));
                }
            }
        });
        let admin = ready_rx
            .recv_timeout(Duration::from_secs(180))
            .with_context(|| format!("kube-local not READY; logs in {}/logs", dir.display()))?;
        Ok(Plane {
            dir: dir.to_path_buf(),
            admin,
            audit_log,
            binary,
            _stdin: child.stdin.take().expect("piped"),
            _child: child,
        })
    }

    /// A kubeconfig for user `user` in system:masters.
    pub fn user(&self, user: &str) -> anyhow::Result<PathBuf> {
        let out = self.dir.join(format!("kubeconfig-{user}"));
        let status = Command::new(&self.binary)
            .args(["kubeconfig", "--dir"])
            .arg(&self.dir)
            .args(["--user", user, "--group", "system:masters", "--out"])
            .arg(&out)
            .status()?;
        if !status.success() {
            bail!("kube-local kubeconfig failed for {user}");
        }
        Ok(out)
    }
}

/// A kube client for `kubeconfig`.
pub async fn client(kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let file = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await?;
    Ok(kube::Client::try_from(config)?)
}
