//! `tether-bench --faults`: each fault scenario of the test kit
//! (`tether_testkit::faults`) run `--runs` times against one local control
//! plane, and the table: how many runs converged, the time from the end of
//! the fault to Synced at the latest commit (median and p99), the API
//! requests and LISTs of the recovery (median), the request rate while the
//! fault lasted (median), every "lost" column summed over the runs, and
//! the records written twice (restarts).

use std::future::Future;
use std::time::Duration;

use tether_testkit::Component;
use tether_testkit::faults::{self, DiskTrouble, Outcome};

/// How long each fault lasts in the full runs.
pub struct Settings {
    pub runs: usize,
    /// `tether`, for the crash scenario (`tether run` killed with -9) and
    /// the disk scenarios (`tether run` in a mount namespace).
    pub tether: std::path::PathBuf,
    /// Kills per crash run.
    pub kills: u64,
    pub fault: Duration,
    pub git_outage: Duration,
    /// Only these scenarios (names of [`SCENARIOS`]); all when empty.
    pub only: Vec<String>,
}

/// The scenarios' short names, for `--only`.
pub const SCENARIOS: [&str; 7] = [
    "throttle", "outage", "restart", "cuts", "git", "crash", "disk",
];

impl Settings {
    fn runs(&self, scenario: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|only| only == scenario)
    }
}

pub async fn run(settings: &Settings) -> anyhow::Result<()> {
    let mut rows = Vec::new();
    let fault = settings.fault;
    let runs = settings.runs;
    if settings.runs("throttle") {
        rows.push(repeat(runs, || faults::throttle_storm(429, Some(2), fault)).await);
        rows.push(repeat(runs, || faults::throttle_storm(503, None, fault)).await);
    }
    if settings.runs("outage") {
        rows.push(repeat(runs, || faults::api_outage(fault)).await);
    }
    if settings.runs("restart") {
        rows.push(repeat(runs, || faults::restart(Component::ApiServer)).await);
        rows.push(repeat(runs, || faults::restart(Component::Etcd)).await);
    }
    if settings.runs("cuts") {
        let (period, every) = (Duration::from_secs(60), Duration::from_secs(3));
        rows.push(repeat(runs, || faults::watch_cuts(period, every)).await);
    }
    if settings.runs("git") {
        let git = settings.git_outage;
        rows.push(repeat(runs, || faults::git_outage(git)).await);
    }
    let tether = settings.tether.clone();
    if !tether.exists() && (settings.runs("crash") || settings.runs("disk")) {
        eprintln!(
            "[faults] no {} beside tether-bench: the crash and disk scenarios are left out (scripts/bench.sh builds it)",
            tether.display()
        );
    } else {
        if settings.runs("crash") {
            let kills = settings.kills;
            rows.push(repeat(runs, || faults::crash(&tether, kills)).await);
        }
        if settings.runs("disk") {
            for trouble in [DiskTrouble::Full, DiskTrouble::ReadOnly] {
                rows.push(repeat(runs, || faults::disk(&tether, trouble)).await);
            }
        }
    }
    println!(
        "fault scenarios ({} runs each; faults of {:?}, Git outage {:?})",
        settings.runs, settings.fault, settings.git_outage
    );
    println!(
        "{:<28} {:>4} {:>9} {:>10} {:>10} {:>9} {:>6} {:>9} {:>6} {:>8} {:>7} {:>6} {:>5}",
        "scenario",
        "runs",
        "converged",
        "median",
        "p99",
        "requests",
        "LISTs",
        "req/s",
        "lost",
        "deleted",
        "records",
        "twice",
        "held"
    );
    for outcomes in &rows {
        print_row(outcomes);
    }
    for outcomes in &rows {
        if let Some(note) = outcomes.iter().rev().find(|o| !o.note.is_empty()) {
            println!("  {}: last run: {}", note.scenario, note.note);
        }
    }
    Ok(())
}

async fn repeat<F, Fut>(runs: usize, scenario: F) -> Vec<Outcome>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Outcome>,
{
    let mut outcomes = Vec::new();
    for run in 1..=runs {
        let outcome = scenario().await;
        eprintln!(
            "[faults] {} run {run}/{runs}: converged {} in {:?}",
            outcome.scenario, outcome.converged, outcome.to_converge
        );
        outcomes.push(outcome);
    }
    outcomes
}

fn print_row(outcomes: &[Outcome]) {
    let Some(first) = outcomes.first() else {
        return;
    };
    let mut times: Vec<Duration> = outcomes.iter().map(|o| o.to_converge).collect();
    times.sort();
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let p99 = times[((times.len() * 99).div_ceil(100)).saturating_sub(1)];
    println!(
        "{:<28} {:>4} {:>9} {:>9.1}s {:>9.1}s {:>9.0} {:>6.0} {:>9.1} {:>6} {:>8} {:>7} {:>6} {:>5}",
        first.scenario,
        outcomes.len(),
        outcomes.iter().filter(|o| o.converged).count(),
        times[times.len() / 2].as_secs_f64(),
        p99.as_secs_f64(),
        median(
            outcomes
                .iter()
                .map(|o| o.requests_in_recovery as f64)
                .collect()
        ),
        median(
            outcomes
                .iter()
                .map(|o| o.lists_in_recovery as f64)
                .collect()
        ),
        median(outcomes.iter().map(|o| o.rate_during_fault).collect()),
        outcomes.iter().map(|o| o.objects_lost).sum::<usize>(),
        outcomes.iter().map(|o| o.wrongly_deleted).sum::<usize>(),
        outcomes.iter().map(|o| o.records_lost).sum::<usize>(),
        outcomes.iter().map(|o| o.duplicates).sum::<usize>(),
        outcomes.iter().filter(|o| o.said_and_held).count(),
    );
}
