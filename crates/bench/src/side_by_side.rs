//! Two ways of running Tether compared side by side on one kube-local: two
//! binaries (`--overhead-baseline`, see `overhead.rs`), or one binary whose
//! apps name no ServiceAccount or one each (`--impersonation`, see
//! `impersonation.rs`).
//!
//! One kube-local (with the audit log) and one repository of N apps; then,
//! per round, the two contenders in turn, in alternating order (A B, B A,
//! A B, …) so that the cluster growing and the shared machine's load
//! drifting weigh on both alike. Each run is a process of its own, under
//! its own certificate user and lease identity, with a fresh cache,
//! syncing N fresh Applications in fresh namespaces:
//!
//! 1. bulk sync: from creating the Applications to all Synced at the head;
//! 2. steady state: once all are Healthy and settled, its API requests
//!    over a window, from the audit log, by verb, resource and the user
//!    they were made as (its own, or one it impersonated), and in
//!    particular its Event writes;
//!
//! then it is stopped and its Applications deleted (their objects stay:
//! the next run syncs its own). It prints figures; it asserts nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use tether_testkit::{ControlPlane, Repo};

use crate::apps::{
    AppSet, bind_service_accounts, create_apps, create_namespaces, delete_apps, wait_healthy,
    wait_synced,
};
use crate::audit::{self, Counts};
use crate::tether::{
    RunFlags, Tether, check_run_flags, free_loopback_addr, wait_leading, write_webhook_secret,
};
use crate::workload::{OBJECTS_PER_APP, repo_files};
use crate::{memory, say, secs, start_plane};

/// Quiet time between all Healthy and the steady-state window, as the
/// main benchmark allows.
const SETTLE: Duration = Duration::from_secs(10);

pub struct Settings {
    pub apps: usize,
    pub rounds: usize,
    pub steady_seconds: u64,
    pub resync_seconds: u64,
    pub controller_manager: bool,
}

/// One of the two things compared.
pub struct Contender {
    /// Its name in the figures and in its runs' identities.
    pub name: &'static str,
    /// Its letter in the order of the runs.
    pub letter: &'static str,
    pub binary: PathBuf,
    /// The ServiceAccount its Applications name in
    /// `spec.serviceAccountName`: made in each app's namespace and bound
    /// there to ClusterRole `edit` before the run (not timed).
    pub service_account: Option<&'static str>,
}

/// What is compared, and how the summary names it.
pub struct Comparison {
    /// The summary's heading.
    pub title: &'static str,
    /// The ratios are the second's figure over the first's.
    pub contenders: [Contender; 2],
    /// The ratio of the bulk-sync times the issue allows.
    pub target_ratio: f64,
}

impl Comparison {
    fn impersonates(&self) -> bool {
        self.contenders.iter().any(|c| c.service_account.is_some())
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
    /// Which contender: 0 or 1.
    contender: usize,
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

pub async fn run(comparison: &Comparison, work: &Path, settings: &Settings) -> anyhow::Result<()> {
    for contender in &comparison.contenders {
        check_run_flags(&contender.binary)?;
    }
    let (plane, admin, audit_log) = start_plane(work, settings.controller_manager).await?;
    let n = settings.apps;
    say(&format!(
        "writing the Git repository: {n} apps × {OBJECTS_PER_APP} objects"
    ));
    let repo = Repo::at(&work.join("repo"));
    let head = repo.commit(&repo_files(n), "bench apps");
    let secret_file = write_webhook_secret(work)?;
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
    for (i, contender) in alternating(settings.rounds).into_iter().enumerate() {
        let run = one_run(&bench, &comparison.contenders[contender], contender, i + 1).await?;
        print_run(comparison, &run, settings.steady_seconds);
        figures.push(run);
    }
    print_summary(comparison, &figures, settings);
    println!();
    println!(
        "work directory (audit log, tether-*.log): {}",
        work.display()
    );
    Ok(())
}

/// The order of the runs, as contender indices: 0 1, then 1 0, and so on
/// (ABBA), so a drift in time favours neither.
fn alternating(rounds: usize) -> Vec<usize> {
    (0..rounds)
        .flat_map(|round| match round % 2 {
            0 => [0, 1],
            _ => [1, 0],
        })
        .collect()
}

async fn one_run(
    bench: &Bench<'_>,
    contender: &Contender,
    which: usize,
    index: usize,
) -> anyhow::Result<Figures> {
    let settings = bench.settings;
    let n = settings.apps;
    // Its own user (the audit log's key) and lease identity: requests of a
    // run still stopping are never counted in the next, and the next leads
    // as soon as the stopped one has given the lease back.
    let identity = format!("{}-{index}", contender.name);
    let user = format!("tether-{identity}");
    let kubeconfig = bench.plane.user_kubeconfig(&user, &["system:masters"]);
    let set = AppSet {
        prefix: format!("run{index}"),
        label: format!("run-{index}"),
        n,
        service_account: contender.service_account.map(str::to_string),
    };
    create_namespaces(&bench.admin, &set.namespaces()).await?;
    bind_service_accounts(&bench.admin, &set, "edit").await?;

    say(&format!(
        "run {index}: starting {} ({})",
        contender.name,
        contender.binary.display()
    ));
    let tether = Tether::start(
        &contender.binary,
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
    let cpu_before = tether.cpu_time()?;
    let (steady_from, steady_to) =
        audit::window(Duration::from_secs(settings.steady_seconds)).await;
    let steady_cpu = tether.cpu_time()? - cpu_before;
    let (rss_mb, _) = memory(tether.pid())?;

    tether.stop()?;
    delete_apps(&bench.admin, &set).await?;
    let [during_sync, steady] = audit::count_windows(
        &bench.audit_log,
        &user,
        [(from, synced), (steady_from, steady_to)],
    )
    .await;
    Ok(Figures {
        contender: which,
        index,
        bulk_sync,
        sync_cpu,
        steady_cpu,
        healthy,
        during_sync,
        steady,
        rss_mb,
    })
}

fn print_run(comparison: &Comparison, run: &Figures, steady_seconds: u64) {
    let impersonated = |counts: &Counts| match comparison.impersonates() {
        true => format!(", {} as impersonated users", counts.impersonated().total()),
        false => String::new(),
    };
    println!(
        "run {} {:<13} bulk sync {:>6.2} s (CPU {:.2} s, {} requests{}, {} Event writes), Healthy at {:.1} s, RSS {:.1} MB",
        run.index,
        comparison.contenders[run.contender].name,
        secs(run.bulk_sync),
        secs(run.sync_cpu),
        run.during_sync.total(),
        impersonated(&run.during_sync),
        run.during_sync.event_writes(),
        secs(run.healthy),
        run.rss_mb
    );
    println!(
        "      steady {steady_seconds} s: CPU {:.2} s, {} requests{}, {} beyond watches and Lease, {} Event writes: {}",
        secs(run.steady_cpu),
        run.steady.total(),
        impersonated(&run.steady),
        run.steady.beyond_watches_and_lease().total(),
        run.steady.event_writes(),
        run.steady.line()
    );
}

fn print_summary(comparison: &Comparison, figures: &[Figures], settings: &Settings) {
    let [first, second] = &comparison.contenders;
    let runs = |which: usize| -> Vec<&Figures> {
        figures.iter().filter(|f| f.contender == which).collect()
    };
    let table = Table {
        letters: [first.letter, second.letter],
        runs: [runs(0), runs(1)],
    };
    let order: Vec<&str> = figures
        .iter()
        .map(|f| comparison.contenders[f.contender].letter)
        .collect();
    println!();
    println!(
        "{} — {} apps × {OBJECTS_PER_APP} objects per run, {} rounds ({}), one kube-local",
        comparison.title,
        settings.apps,
        settings.rounds,
        order.join(" ")
    );
    for contender in &comparison.contenders {
        let apps = match contender.service_account {
            Some(account) => format!(", apps with serviceAccountName: {account}"),
            None => String::new(),
        };
        println!(
            "   {:<13} ({}): {}{apps}",
            contender.name,
            contender.letter,
            contender.binary.display()
        );
    }
    println!("   {:<38} {:>14} {:>14}", "", first.name, second.name);
    let ratio = format!("ratio {} / {}", second.name, first.name);
    let (bulk_first, bulk_second) =
        table.median_row("bulk sync to Synced, median (s)", 2, |f| secs(f.bulk_sync));
    table.list("  each run (s)", |f| format!("{:.2}", secs(f.bulk_sync)));
    println!(
        "   {ratio:<38} {:>29.3}   (target < {})",
        bulk_second / bulk_first,
        comparison.target_ratio
    );
    // CPU time is the steadier measure on a shared machine.
    let (cpu_first, cpu_second) =
        table.median_row("CPU time of the bulk sync, median (s)", 2, |f| {
            secs(f.sync_cpu)
        });
    table.list("  each run (s)", |f| format!("{:.2}", secs(f.sync_cpu)));
    println!("   {ratio:<38} {:>29.3}", cpu_second / cpu_first);
    table.median_row("requests during the bulk sync, median", 0, |f| {
        f.during_sync.total() as f64
    });
    table.median_row("  of which Event writes", 0, |f| {
        f.during_sync.event_writes() as f64
    });
    if comparison.impersonates() {
        table.median_row("  of which as impersonated users", 0, |f| {
            f.during_sync.impersonated().total() as f64
        });
        table.median_row("  impersonated users, median", 0, |f| {
            f.during_sync.impersonated_users() as f64
        });
    }
    table.median_row("RSS after the steady state, median (MB)", 1, |f| f.rss_mb);
    println!(
        "   steady state ({} s after all Healthy + {} s), per run:",
        settings.steady_seconds,
        SETTLE.as_secs()
    );
    table.list("  CPU time (s)", |f| format!("{:.2}", secs(f.steady_cpu)));
    table.list("  requests", |f| f.steady.total().to_string());
    table.list("  beyond watches and Lease (target 0)", |f| {
        f.steady.beyond_watches_and_lease().total().to_string()
    });
    table.list("  Event writes (target 0)", |f| {
        f.steady.event_writes().to_string()
    });
    if comparison.impersonates() {
        table.list("  as impersonated users (target 0)", |f| {
            f.steady.impersonated().total().to_string()
        });
    }
    println!("   steady state beyond watches and Lease, all runs, by verb, resource and user:");
    for (contender, runs) in comparison.contenders.iter().zip(&table.runs) {
        let beyond = runs.iter().fold(Counts::default(), |sum, f| {
            sum.plus(&f.steady.beyond_watches_and_lease())
        });
        println!("     {}: {}", contender.name, beyond.line());
    }
}

/// The two contenders' runs, for the summary's rows.
struct Table<'a> {
    letters: [&'static str; 2],
    runs: [Vec<&'a Figures>; 2],
}

impl Table<'_> {
    /// The median of `value` over each contender's runs.
    fn medians(&self, value: impl Fn(&Figures) -> f64) -> (f64, f64) {
        let [first, second] = &self.runs;
        let median_of = |runs: &Vec<&Figures>| median(runs.iter().map(|f| value(f)).collect());
        (median_of(first), median_of(second))
    }

    /// A row of the medians of `value`, with `decimals`; returns them.
    fn median_row(
        &self,
        what: &str,
        decimals: usize,
        value: impl Fn(&Figures) -> f64,
    ) -> (f64, f64) {
        let (first, second) = self.medians(value);
        println!("   {what:<38} {first:>14.decimals$} {second:>14.decimals$}");
        (first, second)
    }

    /// `value` of every run, one list per contender (lists of any length:
    /// not in the columns).
    fn list(&self, what: &str, value: impl Fn(&Figures) -> String) {
        let lists: Vec<String> = self
            .letters
            .iter()
            .zip(&self.runs)
            .map(|(letter, runs)| {
                let values: Vec<String> = runs.iter().map(|f| value(f)).collect();
                format!("{letter} {}", values.join(", "))
            })
            .collect();
        println!("   {what:<38} {}", lists.join("; "));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_contender_goes_first_in_every_other_round() {
        assert_eq!(alternating(3), [0, 1, 1, 0, 0, 1]);
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(vec![5.0, 1.0, 3.0]), 3.0);
        assert!(median(Vec::new()).is_nan());
    }
}
