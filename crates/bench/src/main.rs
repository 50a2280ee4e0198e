//! `tether-bench`: Tether's performance figures, side by side with kubectl,
//! against one local control plane (kube-local with an audit log).
//!
//! By default (see `versus_kubectl.rs`):
//! 1. Initial sync of N applications × 10 objects: Tether (a separate
//!    `tether run` process) vs `kubectl apply --server-side` per app, in
//!    sequence, and in one call for all.
//! 2. Steady state: Tether's API requests by verb over a quiet window.
//! 3. Commit-to-Synced latency of a 50-object app after a push webhook.
//! 4. The controller's resident memory with everything synced.
//!
//! With `--faults`, only the fault scenarios (see `faults.rs`). With
//! `--in-cluster`, only the figures of the controller running in the
//! cluster (see `in_cluster.rs`); with `--overhead-baseline PATH`, only
//! what metrics, Events and notifications cost against the `tether` at
//! PATH (see `overhead.rs`); with `--impersonation`, only what making each
//! app's changes as its ServiceAccount costs (see `impersonation.rs`);
//! with `--scale 100,200,500,1000`, only the controller's memory as apps
//! are added step by step, then steady state and drift latency at the
//! largest step (see `scale.rs`); with `--flux`, only Tether side by side
//! with Flux at each N of `--apps` (see `flux.rs`).
//!
//! Run with `scripts/bench.sh` (builds release binaries first). It prints
//! figures; it asserts nothing.

mod apps;
mod audit;
mod dashboard;
mod faults;
mod flux;
mod flux_controllers;
mod impersonation;
mod in_cluster;
mod overhead;
mod scale;
mod side_by_side;
mod tether;
mod versus_kubectl;
mod workload;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use kube::api::Api;
use tether_controller::api::Application;
use tether_testkit::{ControlPlane, Launch, Repo, application, client_for};

use crate::apps::{apply, synced_at, wait_synced};
use crate::tether::LEASE_NAMESPACE;
use crate::workload::latency_files;

const WEBHOOK_SECRET: &str = "bench-webhook-secret";
const LATENCY_OBJECTS: usize = 50;

/// Tether's performance figures, side by side with kubectl, against one
/// local control plane.
#[derive(Parser, Debug)]
#[command(name = "tether-bench")]
struct Options {
    /// Benchmark applications (10 objects each); with `--flux`, a list
    /// (`--apps 100,500,1000`), each N measured in turn.
    #[arg(long, value_delimiter = ',', default_value = "200")]
    apps: Vec<usize>,
    /// How long to count requests in the steady state.
    #[arg(long, default_value_t = 120)]
    steady_seconds: u64,
    /// Commits (each announced by a webhook) per latency run.
    #[arg(long, default_value_t = 20)]
    commits: usize,
    /// Tether's safety-net resync.
    #[arg(long, default_value_t = 60)]
    resync_seconds: u64,
    /// Run kube-local without kube-controller-manager and the fake kubelet.
    #[arg(long)]
    no_controller_manager: bool,
    /// Only the in-cluster figures: `tether install --image` on an exec
    /// kubelet, time to Ready, failovers and the leader's memory.
    #[arg(long)]
    in_cluster: bool,
    /// Leader-pod deletions measured with `--in-cluster`.
    #[arg(long, default_value_t = 5)]
    failovers: usize,
    /// Only the overhead figures: this build's `tether` against the one at
    /// PATH (`scripts/bench.sh --overhead` builds the one before metrics,
    /// Events and notifications), each syncing `--apps` fresh apps and then
    /// counted in a steady state, in alternating order, `--rounds` times.
    #[arg(long, value_name = "PATH")]
    overhead_baseline: Option<PathBuf>,
    /// Only the impersonation figures: `--apps` apps naming no
    /// ServiceAccount and `--apps` apps each naming one bound to ClusterRole
    /// `edit`, synced in alternating order, `--rounds` times.
    #[arg(long, conflicts_with = "overhead_baseline")]
    impersonation: bool,
    /// Only the dashboard figures: `--apps` synced apps served by
    /// `tether dashboard -A`: start, first paint, a status change reflected
    /// on the page, memory.
    #[arg(long, conflicts_with_all = ["overhead_baseline", "impersonation", "in_cluster"])]
    dashboard: bool,
    /// Only the fault scenarios: each run `--runs` times, then the table
    /// (time to converge, requests of the recovery, anything lost).
    #[arg(long, conflicts_with_all = ["overhead_baseline", "impersonation", "in_cluster", "dashboard"])]
    faults: bool,
    /// Runs of each scenario with `--faults`.
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// `kill -9`s of `tether run` per crash run with `--faults`.
    #[arg(long, default_value_t = 10)]
    kills: u64,
    /// How long each API fault lasts with `--faults` (seconds).
    #[arg(long, default_value_t = 30)]
    fault_seconds: u64,
    /// How long the Git server is down with `--faults` (seconds).
    #[arg(long, default_value_t = 300)]
    git_outage_seconds: u64,
    /// With `--faults`, only these scenarios (comma-separated): throttle,
    /// outage, restart, cuts, git, crash, disk.
    #[arg(long, value_delimiter = ',', value_parser = faults::SCENARIOS)]
    only: Vec<String>,
    /// Only the scale figures: apps added in these steps (e.g.
    /// `100,200,500,1000`), the controller's memory after each, then the
    /// steady state and drift latency at the last; no kubectl comparison.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["overhead_baseline", "impersonation", "in_cluster", "dashboard", "faults"])]
    scale: Vec<usize>,
    /// Drift changes measured: with `--scale` one after another (default
    /// 100), with `--flux` at once, one ConfigMap field each (default 10).
    #[arg(long)]
    drifts: Option<usize>,
    /// Pause after each `--scale` step before memory is read (seconds).
    #[arg(long, default_value_t = 20)]
    settle_seconds: u64,
    /// Runs of each side with `--overhead-baseline` or `--impersonation`.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Only Tether side by side with Flux's source-controller and
    /// kustomize-controller (built by `scripts/build-flux.sh`), at each N of
    /// `--apps`: initial sync, commit → applied, drift → healed, steady-state
    /// requests, CPU and memory, with the ratios Tether/Flux.
    #[arg(long, conflicts_with_all = ["overhead_baseline", "impersonation", "in_cluster", "dashboard", "faults"])]
    flux: bool,
    /// Flux's `spec.interval` with `--flux` (GitRepository and Kustomizations).
    #[arg(long, default_value = "1m")]
    flux_interval: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let options = Options::parse();
    let controller_manager = !options.no_controller_manager;
    if options.faults {
        return faults::run(&faults::Settings {
            runs: options.runs,
            tether: std::env::current_exe()?.with_file_name("tether"),
            kills: options.kills,
            fault: Duration::from_secs(options.fault_seconds),
            git_outage: Duration::from_secs(options.git_outage_seconds),
            only: options.only.clone(),
        })
        .await;
    }
    let tether_bin = std::env::current_exe()?.with_file_name("tether");
    if !tether_bin.exists() {
        bail!(
            "{} not found: build it (scripts/bench.sh does)",
            tether_bin.display()
        );
    }
    if options.in_cluster {
        return in_cluster::run(&tether_bin, options.failovers).await;
    }
    let work = std::env::temp_dir().join(format!("tether-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    if options.flux {
        let settings = flux::Settings {
            apps: options.apps.clone(),
            steady_seconds: options.steady_seconds,
            resync_seconds: options.resync_seconds,
            commits: options.commits,
            drifts: options.drifts.unwrap_or(10),
            interval: options.flux_interval.clone(),
            controller_manager,
        };
        return flux::run(&tether_bin, &work, &settings).await;
    }
    let n = options.apps.first().copied().unwrap_or(200);
    let side_by_side = side_by_side::Settings {
        apps: n,
        rounds: options.rounds,
        steady_seconds: options.steady_seconds,
        resync_seconds: options.resync_seconds,
        controller_manager,
    };
    if let Some(baseline) = &options.overhead_baseline {
        return overhead::run(baseline, &tether_bin, &work, &side_by_side).await;
    }
    if options.impersonation {
        return impersonation::run(&tether_bin, &work, &side_by_side).await;
    }
    if !options.scale.is_empty() {
        let mut steps = options.scale.clone();
        steps.sort_unstable();
        steps.dedup();
        return scale::run(
            &tether_bin,
            &work,
            &scale::Settings {
                steps,
                steady_seconds: options.steady_seconds,
                resync_seconds: options.resync_seconds,
                controller_manager,
                drifts: options.drifts.unwrap_or(100),
                settle: Duration::from_secs(options.settle_seconds),
            },
        )
        .await;
    }
    if options.dashboard {
        return dashboard::run(&tether_bin, &work, n, controller_manager).await;
    }
    let settings = versus_kubectl::Settings {
        apps: n,
        steady_seconds: options.steady_seconds,
        resync_seconds: options.resync_seconds,
        commits: options.commits,
        controller_manager,
    };
    versus_kubectl::run(&tether_bin, &work, &settings).await
}

/// Starts kube-local in `work/plane` with an audit log and installs the
/// CRDs; returns the plane, its admin client and the audit log's path.
async fn start_plane(
    work: &Path,
    controller_manager: bool,
) -> anyhow::Result<(ControlPlane, kube::Client, PathBuf)> {
    say(&format!(
        "starting kube-local (controller-manager and fake kubelet: {controller_manager})"
    ));
    let audit_log = work.join("plane/audit.log");
    let plane = ControlPlane::start(
        &work.join("plane"),
        &Launch {
            controller_manager,
            audit_log: Some(audit_log.clone()),
            show_stderr: false,
            exec_images: Vec::new(),
        },
    );
    let admin = client_for(plane.kubeconfig()).await;
    tether_controller::install::install(admin.clone(), LEASE_NAMESPACE)
        .await
        .context("installing the CRDs")?;
    Ok((plane, admin, audit_log))
}

fn say(message: &str) {
    eprintln!("tether-bench: {message}");
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Nearest-rank percentile of sorted `values`, in milliseconds.
fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1000.0
}

/// `p50 … ms   p99 … ms   max … ms` of `sorted` (nearest rank).
fn percentiles(sorted: &[Duration]) -> String {
    format!(
        "p50 {:.0} ms   p99 {:.0} ms   max {:.0} ms",
        percentile_ms(sorted, 0.50),
        percentile_ms(sorted, 0.99),
        percentile_ms(sorted, 1.0)
    )
}

async fn latency(
    admin: &kube::Client,
    repo: &Repo,
    head: &str,
    http_addr: SocketAddr,
    first_round: usize,
    commits: usize,
    list_files: bool,
) -> anyhow::Result<Vec<Duration>> {
    let api: Api<Application> = Api::namespaced(admin.clone(), "bench-latency");
    let app = application("latency", "bench-latency", &repo.url(), "apps/latency")
        .label("bench", "latency");
    apply(&api, "latency", app.manifest()).await?;
    wait_synced(admin, "bench=latency", 1, head).await?;
    let mut latencies = Vec::with_capacity(commits);
    for round in first_round..first_round + commits {
        let commit = repo.commit(
            &latency_files(LATENCY_OBJECTS, round),
            &format!("round {round}"),
        );
        let changed = list_files.then(|| repo.changed(&commit));
        let started = Instant::now();
        let status = post_push(http_addr, &repo.url(), changed)?;
        if status != 202 {
            bail!("webhook answered {status}");
        }
        let deadline = started + Duration::from_secs(60);
        loop {
            let app = api.get("latency").await?;
            if synced_at(&app, &commit) {
                break;
            }
            if Instant::now() > deadline {
                bail!("commit {commit} not Synced 60 s after its webhook");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        latencies.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(latencies)
}

/// Sends a signed GitHub push event for `repo_url`, with one commit's
/// added, modified and removed paths when given; returns the HTTP status.
fn post_push(
    addr: SocketAddr,
    repo_url: &str,
    changed: Option<[Vec<String>; 3]>,
) -> anyhow::Result<u16> {
    Ok(tether_testkit::webhook::post_github_push(
        addr,
        WEBHOOK_SECRET,
        repo_url,
        changed,
    )?)
}

/// VmRSS and VmHWM of process `pid`, in MB.
fn memory(pid: u32) -> anyhow::Result<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok((status_mb(&status, "VmRSS:"), status_mb(&status, "VmHWM:")))
}

/// Of process `pid`'s VmRSS, the anonymous part (heap, stacks) and the
/// file-backed part (the binary's own code and read-only data), in MB.
fn resident_split(pid: u32) -> anyhow::Result<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok((
        status_mb(&status, "RssAnon:"),
        status_mb(&status, "RssFile:"),
    ))
}

/// Field `name` (a size in kB) of a /proc/PID/status text, in MB.
fn status_mb(status: &str, name: &str) -> f64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}
