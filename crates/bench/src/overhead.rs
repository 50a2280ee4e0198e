//! `tether-bench --overhead-baseline PATH`: what metrics, Events and
//! notifications cost, measured against a `tether` built without them.
//!
//! One kube-local (with the audit log) and one repository of N apps; then,
//! per round, the baseline and this build's `tether run` in turn, in
//! alternating order (B C, C B, B C, …) so that the cluster growing and
//! the shared machine's load drifting weigh on both alike. Each run is a
//! process of its own, under its own certificate user and lease identity,
//! with a fresh cache, syncing N fresh Applications in fresh namespaces:
//!
//! 1. bulk sync: from creating the Applications to all Synced at the head;
//! 2. steady state: once all are Healthy and settled, its API requests
//!    over a window, from the audit log, by verb and resource, and in
//!    particular its Event writes;
//!
//! then it is stopped and its Applications deleted (their objects stay:
//! the next run syncs its own). It prints figures; it asserts nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use tether_testkit::{ControlPlane, Repo};

use crate::apps::{AppSet, create_apps, create_namespaces, delete_apps, wait_healthy, wait_synced};
use crate::audit::{self, Counts};
use crate::tether::{RunFlags, Tether, check_run_flags, free_loopback_addr, wait_leading};
use crate::workload::{OBJECTS_PER_APP, repo_files};
use crate::{WEBHOOK_SECRET, memory, say, secs, start_plane};

/// Quiet time between all Healthy and the steady-state window, as the
/// main benchmark allows.
const SETTLE: Duration = Duration::from_secs(10);
/// The ratio current/baseline of the bulk-sync time the issue allows.
const TARGET_RATIO: f64 = 1.05;

pub struct Settings {
    pub apps: usize,
    pub rounds: usize,
    pub steady_seconds: u64,
    pub resync_seconds: u64,
    pub controller_manager: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Binary {
    Baseline,
    Current,
}

impl Binary {
    fn name(self) -> &'static str {
        match self {
            Binary::Baseline => "baseline",
            Binary::Current => "current",
        }
    }
}

/// What every run shares.
struct Bench<'a> {
    plane: &'a ControlPlane,
    admin: kube::Client,
    audit_log: PathBuf,
    work: &'a Path,
    repo_url: String,
    head: String,
    secret_file: PathBuf,
    settings: &'a Settings,
}

/// One run's figures.
struct Figures {
    binary: Binary,
    index: usize,
    bulk_sync: Duration,
    /// The process's CPU time during the bulk sync and the steady window.
    sync_cpu: Duration,
    steady_cpu: Duration,
    /// From creating the Applications to all Healthy.
    healthy: Duration,
    during_sync: Counts,
    steady: Counts,
    rss_mb: f64,
}

pub async fn run(
    baseline: &Path,
    current: &Path,
    work: &Path,
    settings: &Settings,
) -> anyhow::Result<()> {
    check_run_flags(baseline)?;
    check_run_flags(current)?;
    let (plane, admin, audit_log) = start_plane(work, settings.controller_manager).await?;
    let n = settings.apps;
    say(&format!(
        "writing the Git repository: {n} apps × {OBJECTS_PER_APP} objects"
    ));
    let repo = Repo::at(&work.join("repo"));
    let head = repo.commit(&repo_files(n), "bench apps");
    let secret_file = work.join("webhook-secret");
    std::fs::write(&secret_file, WEBHOOK_SECRET)?;
    let bench = Bench {
        plane: &plane,
        admin,
        audit_log,
        work,
        repo_url: repo.url(),
        head,
        secret_file,
        settings,
    };

    let mut figures = Vec::new();
    for (i, binary) in alternating(settings.rounds).into_iter().enumerate() {
        let path = match binary {
            Binary::Baseline => baseline,
            Binary::Current => current,
        };
        let run = one_run(&bench, binary, path, i + 1).await?;
        print_run(&run, settings.steady_seconds);
        figures.push(run);
    }
    print_summary(&figures, settings, baseline, current);
    println!();
    println!(
        "work directory (audit log, tether-*.log): {}",
        work.display()
    );
    Ok(())
}

/// The order of the runs: B C, then C B, and so on (ABBA), so a drift in
/// time favours neither.
fn alternating(rounds: usize) -> Vec<Binary> {
    (0..rounds)
        .flat_map(|round| match round % 2 {
            0 => [Binary::Baseline, Binary::Current],
            _ => [Binary::Current, Binary::Baseline],
        })
        .collect()
}

async fn one_run(
    bench: &Bench<'_>,
    binary: Binary,
    path: &Path,
    index: usize,
) -> anyhow::Result<Figures> {
    let settings = bench.settings;
    let n = settings.apps;
    // Its own user (the audit log's key) and lease identity: requests of a
    // run still stopping are never counted in the next, and the next leads
    // as soon as the stopped one has given the lease back.
    let identity = format!("{}-{index}", binary.name());
    let user = format!("tether-{identity}");
    let kubeconfig = bench.plane.user_kubeconfig(&user, &["system:masters"]);
    let set = AppSet {
        prefix: format!("ov{index}"),
        label: format!("overhead-{index}"),
        n,
    };
    create_namespaces(&bench.admin, &set.namespaces()).await?;

    say(&format!(
        "run {index}: starting {} ({})",
        binary.name(),
        path.display()
    ));
    let tether = Tether::start(
        path,
        &RunFlags {
            kubeconfig: &kubeconfig,
            identity: &identity,
            resync_seconds: settings.resync_seconds,
            http_addr: free_loopback_addr()?,
            webhook_secret_file: &bench.secret_file,
            cache_dir: bench.work.join(format!("cache-{identity}")),
            log: bench.work.join(format!("tether-{identity}.log")),
        },
    )?;
    wait_leading(&bench.admin, &identity).await?;

    say(&format!(
        "run {index}: {n} Applications, waiting for Synced"
    ));
    let cpu_before = tether.cpu_time()?;
    let from = Timestamp::now();
    let started = Instant::now();
    create_apps(&bench.admin, &bench.repo_url, &set).await?;
    wait_synced(&bench.admin, &set.selector(), n, &bench.head).await?;
    let bulk_sync = started.elapsed();
    let sync_cpu = tether.cpu_time()? - cpu_before;
    let synced = Timestamp::now();

    wait_healthy(&bench.admin, &set.selector(), n, &bench.head).await?;
    let healthy = started.elapsed();
    say(&format!(
        "run {index}: Synced after {:.1} s, Healthy after {:.1} s; settling {} s, counting {} s",
        secs(bulk_sync),
        secs(healthy),
        SETTLE.as_secs(),
        settings.steady_seconds
    ));
    tokio::time::sleep(SETTLE).await;
    let steady_from = Timestamp::now();
    let cpu_before = tether.cpu_time()?;
    tokio::time::sleep(Duration::from_secs(settings.steady_seconds)).await;
    let steady_to = Timestamp::now();
    let steady_cpu = tether.cpu_time()? - cpu_before;
    let (rss_mb, _) = memory(tether.pid())?;

    tether.stop()?;
    delete_apps(&bench.admin, &set).await?;
    let mut counts = audit::count_windows(
        &bench.audit_log,
        &user,
        &[(from, synced), (steady_from, steady_to)],
    )
    .await
    .into_iter();
    Ok(Figures {
        binary,
        index,
        bulk_sync,
        sync_cpu,
        steady_cpu,
        healthy,
        during_sync: counts.next().unwrap_or_default(),
        steady: counts.next().unwrap_or_default(),
        rss_mb,
    })
}

fn print_run(run: &Figures, steady_seconds: u64) {
    println!(
        "run {} {:<8}  bulk sync {:>6.2} s (CPU {:.2} s, {} requests, {} Event writes), Healthy at {:.1} s, RSS {:.1} MB",
        run.index,
        run.binary.name(),
        secs(run.bulk_sync),
        secs(run.sync_cpu),
        run.during_sync.total(),
        run.during_sync.event_writes(),
        secs(run.healthy),
        run.rss_mb
    );
    println!(
        "      steady {steady_seconds} s: CPU {:.2} s, {} requests, {} beyond watches and Lease, {} Event writes: {}",
        secs(run.steady_cpu),
        run.steady.total(),
        run.steady.beyond_watches_and_lease(),
        run.steady.event_writes(),
        run.steady.line()
    );
}

fn print_summary(figures: &[Figures], settings: &Settings, baseline: &Path, current: &Path) {
    let of = |binary: Binary| -> Vec<&Figures> {
        figures.iter().filter(|f| f.binary == binary).collect()
    };
    let (base, cur) = (of(Binary::Baseline), of(Binary::Current));
    let order: Vec<&str> = figures
        .iter()
        .map(|f| match f.binary {
            Binary::Baseline => "B",
            Binary::Current => "C",
        })
        .collect();
    println!();
    println!(
        "Overhead of metrics, Events and notifications — {} apps × {OBJECTS_PER_APP} objects per run, {} rounds ({}), one kube-local",
        settings.apps,
        settings.rounds,
        order.join(" ")
    );
    println!("   baseline (B): {}", baseline.display());
    println!("   current  (C): {}", current.display());
    println!("                                          baseline        current");
    let bulk = |runs: &[&Figures]| median(runs.iter().map(|f| secs(f.bulk_sync)).collect());
    let (bulk_base, bulk_cur) = (bulk(&base), bulk(&cur));
    row("bulk sync to Synced, median (s)", bulk_base, bulk_cur, 2);
    list_row("  each run (s)", &base, &cur, |f| {
        format!("{:.2}", secs(f.bulk_sync))
    });
    println!(
        "   ratio current / baseline                  {:.3}   (target < {TARGET_RATIO})",
        bulk_cur / bulk_base
    );
    let median_of = |runs: &[&Figures], value: fn(&Figures) -> f64| {
        median(runs.iter().map(|f| value(f)).collect())
    };
    // CPU time is the steadier measure on a shared machine.
    let (cpu_base, cpu_cur) = (
        median_of(&base, |f| secs(f.sync_cpu)),
        median_of(&cur, |f| secs(f.sync_cpu)),
    );
    row(
        "CPU time of the bulk sync, median (s)",
        cpu_base,
        cpu_cur,
        2,
    );
    list_row("  each run (s)", &base, &cur, |f| {
        format!("{:.2}", secs(f.sync_cpu))
    });
    println!(
        "   ratio current / baseline                  {:.3}",
        cpu_cur / cpu_base
    );
    row(
        "requests during the bulk sync, median",
        median_of(&base, |f| f.during_sync.total() as f64),
        median_of(&cur, |f| f.during_sync.total() as f64),
        0,
    );
    row(
        "  of which Event writes",
        median_of(&base, |f| f.during_sync.event_writes() as f64),
        median_of(&cur, |f| f.during_sync.event_writes() as f64),
        0,
    );
    row(
        "RSS after the steady state, median (MB)",
        median_of(&base, |f| f.rss_mb),
        median_of(&cur, |f| f.rss_mb),
        1,
    );
    println!(
        "   steady state ({} s after all Healthy + {} s), per run:",
        settings.steady_seconds,
        SETTLE.as_secs()
    );
    list_row("  CPU time (s)", &base, &cur, |f| {
        format!("{:.2}", secs(f.steady_cpu))
    });
    list_row("  requests", &base, &cur, |f| f.steady.total().to_string());
    list_row("  beyond watches and Lease (target 0)", &base, &cur, |f| {
        f.steady.beyond_watches_and_lease().to_string()
    });
    list_row("  Event writes (target 0)", &base, &cur, |f| {
        f.steady.event_writes().to_string()
    });
}

fn row(what: &str, baseline: f64, current: f64, decimals: usize) {
    println!("   {what:<38} {baseline:>10.decimals$}     {current:>10.decimals$}");
}

fn list_row(what: &str, base: &[&Figures], cur: &[&Figures], value: impl Fn(&Figures) -> String) {
    let join = |runs: &[&Figures]| runs.iter().map(|f| value(f)).collect::<Vec<_>>().join(", ");
    // Lists of any length: not in the columns.
    println!("   {what:<38} B {}; C {}", join(base), join(cur));
}

/// The median, the mean of the middle two for an even count.
fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    match values.len() % 2 {
        1 => values[mid],
        _ => (values[mid - 1] + values[mid]) / 2.0,
    }
}
