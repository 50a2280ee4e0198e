//! `tether-bench`: Tether's performance figures, side by side with kubectl,
//! against one local control plane (kube-local with an audit log).
//!
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
mod workload;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use tether_controller::api::Application;
use tether_testkit::{ControlPlane, Launch, Repo, application, client_for, run_ok};

use crate::apps::{
    AppSet, app_name, apply, create_apps, create_namespaces, synced_at, wait_healthy, wait_synced,
};
use crate::audit::Counts;
use crate::tether::{LEASE_NAMESPACE, start_leading};
use crate::workload::{OBJECTS_PER_APP, app_files, latency_files, repo_files};

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
    let initial_apps = AppSet {
        prefix: "tt".into(),
        label: "initial".into(),
        n,
        service_account: None,
    };

    let (plane, admin, audit_log) = start_plane(&work, controller_manager).await?;
    let tether_kubeconfig = plane.user_kubeconfig("tether", &["system:masters"]);
    let kubectl_kubeconfig = plane.user_kubeconfig("kubectl-bench", &["system:masters"]);

    say(&format!(
        "writing the Git repository: {n} apps × {OBJECTS_PER_APP} objects"
    ));
    let repo = Repo::at(&work.join("repo"));
    let mut files = repo_files(n);
    files.extend(latency_files(LATENCY_OBJECTS, 0));
    let head = repo.commit(&files, "bench apps");
    let all_dir = work.join("kubectl-all");
    for i in 0..n {
        let text: Vec<String> = app_files(&app_name(i), Some(&format!("k1-{i:03}")))
            .into_iter()
            .map(|(_, text)| text)
            .collect();
        std::fs::create_dir_all(&all_dir)?;
        std::fs::write(
            all_dir.join(format!("{}.yaml", app_name(i))),
            text.join("---\n"),
        )?;
    }

    say("creating namespaces");
    let mut namespaces = vec!["bench-latency".to_string()];
    for i in 0..n {
        namespaces.extend([
            initial_apps.namespace(i),
            format!("kc-{i:03}"),
            format!("k1-{i:03}"),
        ]);
    }
    create_namespaces(&admin, &namespaces).await?;

    // 1. Initial sync with Tether.
    say("starting `tether run` as its own process");
    let http_addr: SocketAddr = "127.0.0.1:18471".parse()?;
    let tether = start_leading(
        &tether_bin,
        &admin,
        &tether_kubeconfig,
        &work,
        options.resync_seconds,
        http_addr,
    )
    .await?;

    say(&format!(
        "Tether: creating {n} Applications and waiting for Synced"
    ));
    let from = Timestamp::now();
    let started = Instant::now();
    create_apps(&admin, &repo.url(), &initial_apps).await?;
    wait_synced(&admin, "bench=initial", n, &head).await?;
    let tether_sync = started.elapsed();
    let all_synced = Timestamp::now();
    let tether_pid = tether.pid();

    // 2. Steady state.
    // Nothing is changing only once the Deployments have rolled out (the
    // controller-manager writes their status until then, and each write
    // rightly costs Tether a comparison): wait for Healthy, then settle.
    say("waiting for all Applications Healthy (Deployments rolled out)");
    wait_healthy(&admin, "bench=initial", n, &head).await?;
    let tether_healthy = started.elapsed();
    let healthy_at = Timestamp::now();
    let settle = Duration::from_secs(10);
    say(&format!(
        "steady state: settling {}s, then counting for {}s (resync every {}s)",
        settle.as_secs(),
        options.steady_seconds,
        options.resync_seconds
    ));
    tokio::time::sleep(settle).await;
    let (steady_from, steady_to) = audit::window(Duration::from_secs(options.steady_seconds)).await;

    // 4. Memory, with everything synced.
    let (rss, hwm) = memory(tether_pid)?;

    // 3. Commit-to-Synced latency after a webhook.
    say(&format!(
        "latency: {} commits to a {LATENCY_OBJECTS}-object app, each announced by a webhook",
        options.commits
    ));
    let latencies = latency(&admin, &repo, &head, http_addr, 1, options.commits, true).await?;
    say("latency again, with pushes that do not list the files they changed");
    let synced_to = repo.head();
    let unlisted = latency(
        &admin,
        &repo,
        &synced_to,
        http_addr,
        options.commits + 1,
        options.commits,
        false,
    )
    .await?;
    // The other apps of the repository record each new commit in the
    // background lane; how far behind is the last one?
    let last_push =
        Instant::now() - unlisted.last().copied().unwrap_or_default() - Duration::from_millis(500);
    let last_commit = repo.head();
    wait_synced(&admin, "bench=initial", n, &last_commit).await?;
    let recorded_lag = last_push.elapsed();

    let initial = audit::count(&audit_log, "tether", from, all_synced).await;
    let rollout = audit::count(&audit_log, "tether", all_synced, healthy_at).await;
    let settling = audit::count(&audit_log, "tether", healthy_at, steady_from).await;
    let steady = audit::count(&audit_log, "tether", steady_from, steady_to).await;
    tether.stop()?;

    // 1b. kubectl, after Tether has stopped.
    say(&format!(
        "kubectl: {n} × `kubectl apply --server-side -n NS -f apps/APP/`"
    ));
    let kubectl = Kubectl {
        kubeconfig: kubectl_kubeconfig,
        cache: work.join("kubectl-cache"),
    };
    kubectl.run(&["api-resources"]); // a warm discovery cache, as a CI runner would have
    let from = Timestamp::now();
    let started = Instant::now();
    let mut per_app = Vec::with_capacity(n);
    for i in 0..n {
        let one = Instant::now();
        let dir = repo.dir.join("apps").join(app_name(i));
        let ns = format!("kc-{i:03}");
        kubectl.apply(&["-n", &ns, "-f", &dir.to_string_lossy()]);
        per_app.push(one.elapsed());
    }
    let kubectl_sequential = started.elapsed();
    let sequential_counts = audit::count(&audit_log, "kubectl-bench", from, Timestamp::now()).await;

    say("kubectl: one `kubectl apply --server-side -f` for all apps");
    let from = Timestamp::now();
    let started = Instant::now();
    kubectl.apply(&["-f", &all_dir.to_string_lossy()]);
    let kubectl_one = started.elapsed();
    let one_counts = audit::count(&audit_log, "kubectl-bench", from, Timestamp::now()).await;

    // The figures.
    let objects = n * OBJECTS_PER_APP;
    println!();
    println!(
        "Tether benchmark — {n} apps × {OBJECTS_PER_APP} objects = {objects} objects, one kube-local"
    );
    println!(
        "(controller-manager + fake kubelet: {}; 2-core shared machine; times are wall clock)",
        controller_manager
    );
    println!();
    println!("1. Initial sync");
    println!(
        "   Tether (concurrency 16, own process)     {:>8.1} s   {:>6.0} objects/s",
        secs(tether_sync),
        objects as f64 / secs(tether_sync)
    );
    println!(
        "   kubectl apply --server-side, per app     {:>8.1} s   {:>6.0} objects/s   (median {:.0} ms/app)",
        secs(kubectl_sequential),
        objects as f64 / secs(kubectl_sequential),
        median_ms(&mut per_app)
    );
    println!(
        "   kubectl apply --server-side, one call    {:>8.1} s   {:>6.0} objects/s",
        secs(kubectl_one),
        objects as f64 / secs(kubectl_one)
    );
    println!(
        "   ratio kubectl per app / Tether           {:>8.2}×   (target ≥ 3×)",
        secs(kubectl_sequential) / secs(tether_sync)
    );
    println!(
        "   ratio kubectl one call / Tether          {:>8.2}×",
        secs(kubectl_one) / secs(tether_sync)
    );
    print_counts("Tether requests", &initial, objects);
    print_counts("kubectl per app requests", &sequential_counts, objects);
    print_counts("kubectl one call requests", &one_counts, objects);
    println!();
    println!(
        "   (all Healthy, i.e. Deployments rolled out, after {:.1} s)",
        secs(tether_healthy)
    );
    println!();
    println!("2. Steady state (after all Synced and Healthy)");
    println!("   while Deployments rolled out: {}", rollout.line());
    println!(
        "   first {}s (settling): {}",
        settle.as_secs(),
        settling.line()
    );
    println!(
        "   next {}s: {} request(s) beyond watches and Lease renewals (target 0)",
        options.steady_seconds,
        steady.beyond_watches_and_lease().total()
    );
    println!("     by verb: {}", steady.line());
    println!();
    println!(
        "3. Commit-to-Synced after a push webhook ({LATENCY_OBJECTS}-object app, {} commits)",
        latencies.len()
    );
    for (what, latencies) in [
        ("push listing its files (as GitHub sends)", &latencies),
        ("push without file lists (worst case)   ", &unlisted),
    ] {
        let mut sorted = latencies.clone();
        sorted.sort();
        println!(
            "   {what}  {}   (target p99 < 2000 ms)",
            percentiles(&sorted)
        );
    }
    println!(
        "   every other app of the repository records the last commit {:.1} s after its push",
        recorded_lag.as_secs_f64()
    );
    println!();
    println!("4. Controller memory with {objects} objects synced (tether run, pid {tether_pid})");
    println!(
        "   VmRSS {:.1} MB   VmHWM (peak) {:.1} MB   (target < 100 MB)",
        rss, hwm
    );
    println!();
    println!("work directory (audit log, tether.log): {}", work.display());
    Ok(())
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

fn median_ms(values: &mut [Duration]) -> f64 {
    values.sort();
    percentile_ms(values, 0.5)
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

fn print_counts(what: &str, counts: &Counts, objects: usize) {
    println!(
        "   {what}: {} ({:.1} per object): {}",
        counts.total(),
        counts.total() as f64 / objects as f64,
        counts.line()
    );
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

struct Kubectl {
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    fn apply(&self, args: &[&str]) {
        let mut full = vec!["apply", "--server-side", "--field-manager", "bench-kubectl"];
        full.extend_from_slice(args);
        self.run(&full);
    }

    fn run(&self, args: &[&str]) {
        run_ok(
            Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&self.kubeconfig)
                .arg("--cache-dir")
                .arg(&self.cache)
                .args(args),
        );
    }
}
