//! `tether run` as its own process, as the benchmark starts it, and
//! waiting for it to lead.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

pub const LEASE_NAMESPACE: &str = "tether-system";
const LEASE_NAME: &str = "tether-controller";

/// The `tether run` flags the benchmark passes; a binary to compare must
/// have them all (see [`check_run_flags`]).
const RUN_FLAGS: [&str; 7] = [
    "--kubeconfig",
    "--lease-namespace",
    "--identity",
    "--resync-seconds",
    "--http-addr",
    "--webhook-secret-file",
    "--cache-dir",
];

/// How one `tether run` is started.
pub struct RunFlags<'a> {
    /// A kubeconfig of its own certificate user, so the audit log tells
    /// its requests apart.
    pub kubeconfig: &'a Path,
    /// Its lease identity.
    pub identity: &'a str,
    pub resync_seconds: u64,
    pub http_addr: SocketAddr,
    pub webhook_secret_file: &'a Path,
    pub cache_dir: PathBuf,
    /// Where its stderr (the log) goes.
    pub log: PathBuf,
}

/// A running `tether run`; sent SIGTERM when dropped, also on an early
/// error.
pub struct Tether {
    child: Option<Child>,
    pid: u32,
}

impl Tether {
    pub fn start(binary: &Path, flags: &RunFlags) -> anyhow::Result<Tether> {
        let log = std::fs::File::create(&flags.log)
            .with_context(|| format!("{}: creating the log", flags.log.display()))?;
        let child = Command::new(binary)
            .args(["run", "--kubeconfig"])
            .arg(flags.kubeconfig)
            .args(["--lease-namespace", LEASE_NAMESPACE])
            .args(["--identity", flags.identity])
            .args(["--resync-seconds", &flags.resync_seconds.to_string()])
            .args(["--http-addr", &flags.http_addr.to_string()])
            .arg("--webhook-secret-file")
            .arg(flags.webhook_secret_file)
            .arg("--cache-dir")
            .arg(&flags.cache_dir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("{}: starting `tether run`", binary.display()))?;
        Ok(Tether {
            pid: child.id(),
            child: Some(child),
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The CPU time (user and system, all threads) it has used so far.
    /// Unlike wall-clock time, this hardly depends on what else the shared
    /// machine is running.
    pub fn cpu_time(&self) -> anyhow::Result<Duration> {
        cpu_time(self.pid)
    }

    /// Stops it as a pod is stopped (SIGTERM: it gives its lease back) and
    /// waits for it to exit; kills it if it has not within 20 s.
    pub fn stop(mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        terminate(self.pid);
        let deadline = Instant::now() + Duration::from_secs(20);
        while child.try_wait()?.is_none() {
            if Instant::now() > deadline {
                child.kill()?;
                child.wait()?;
                bail!(
                    "tether run (pid {}): still running 20 s after SIGTERM, killed",
                    self.pid
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

impl Drop for Tether {
    fn drop(&mut self) {
        if self.child.is_some() {
            terminate(self.pid);
        }
    }
}

/// The CPU time (user and system, all threads) process `pid` has used so
/// far.
pub fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("{path}: reading"))?;
    // Fields after the command name (which may hold spaces), from the
    // state (field 3) on: utime is field 14, stime field 15, in clock
    // ticks of USER_HZ, 100 on Linux.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |field: usize| -> anyhow::Result<u64> {
        let text = fields
            .get(field - 3)
            .with_context(|| format!("{path}: no field {field}"))?;
        Ok(text.parse()?)
    };
    Ok(Duration::from_millis((ticks(14)? + ticks(15)?) * 10))
}

fn terminate(pid: u32) {
    let _ = Command::new("kill").arg(pid.to_string()).status();
}

/// Fails, naming them, when `binary run` lacks flags the benchmark passes.
pub fn check_run_flags(binary: &Path) -> anyhow::Result<()> {
    let output = Command::new(binary)
        .args(["run", "--help"])
        .output()
        .with_context(|| format!("{}: running `run --help`", binary.display()))?;
    let help = String::from_utf8_lossy(&output.stdout);
    let missing: Vec<&str> = RUN_FLAGS
        .into_iter()
        .filter(|flag| !help.contains(flag))
        .collect();
    if !missing.is_empty() {
        bail!(
            "{}: `run` has no {} (the benchmark passes them)",
            binary.display(),
            missing.join(", ")
        );
    }
    Ok(())
}

/// A loopback address no one listens on now.
pub fn free_loopback_addr() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding a loopback port")?;
    Ok(listener.local_addr()?)
}

/// Starts the benchmark's own `tether run`, `bench` (webhook secret, cache
/// and log in `work`, HTTP on a free loopback port), and waits until it
/// leads; returns it and the address its webhooks are posted to.
pub async fn start_leading(
    binary: &Path,
    admin: &kube::Client,
    kubeconfig: &Path,
    work: &Path,
    resync_seconds: u64,
) -> anyhow::Result<(Tether, SocketAddr)> {
    let http_addr = free_loopback_addr()?;
    let secret_file = write_webhook_secret(work)?;
    let tether = Tether::start(
        binary,
        &RunFlags {
            kubeconfig,
            identity: "bench",
            resync_seconds,
            http_addr,
            webhook_secret_file: &secret_file,
            cache_dir: work.join("tether-cache"),
            log: work.join("tether.log"),
        },
    )?;
    wait_leading(admin, "bench").await?;
    Ok((tether, http_addr))
}

/// Writes the benchmark's webhook secret (what `post_push` signs with) to
/// `work/webhook-secret`, for `--webhook-secret-file`; returns that path.
pub fn write_webhook_secret(work: &Path) -> anyhow::Result<PathBuf> {
    let secret_file = work.join("webhook-secret");
    std::fs::write(&secret_file, crate::WEBHOOK_SECRET)?;
    Ok(secret_file)
}

/// Waits until `identity` holds the controller's Lease.
pub async fn wait_leading(admin: &kube::Client, identity: &str) -> anyhow::Result<()> {
    let leases: Api<Lease> = Api::namespaced(admin.clone(), LEASE_NAMESPACE);
    for _ in 0..600 {
        if let Ok(lease) = leases.get(LEASE_NAME).await
            && lease.spec.and_then(|s| s.holder_identity).as_deref() == Some(identity)
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("tether run as {identity}: did not take the lease within 60 s")
}
