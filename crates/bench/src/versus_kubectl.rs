//! The default figures: Tether (a separate `tether run` process) against
//! `kubectl apply --server-side` on the same objects and the same API
//! server — initial sync, steady-state requests, commit-to-Synced latency
//! after a push webhook, and the controller's memory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use tether_testkit::{Repo, run_ok};

use crate::apps::{AppSet, app_name, create_apps, create_namespaces, wait_healthy, wait_synced};
use crate::audit::{self, Counts};
use crate::tether::start_leading;
use crate::workload::{OBJECTS_PER_APP, app_files, latency_files, repo_files};
use crate::{LATENCY_OBJECTS, latency, memory, percentile_ms, percentiles, say, secs, start_plane};

/// What one run measures.
pub struct Settings {
    /// Benchmark applications (10 objects each).
    pub apps: usize,
    /// How long to count requests in the steady state.
    pub steady_seconds: u64,
    /// Tether's safety-net resync.
    pub resync_seconds: u64,
    /// Commits (each announced by a webhook) per latency run.
    pub commits: usize,
    /// Whether kube-local runs kube-controller-manager and the fake kubelet.
    pub controller_manager: bool,
}

/// Runs both sides and prints the figures.
pub async fn run(tether_bin: &Path, work: &Path, settings: &Settings) -> anyhow::Result<()> {
    let n = settings.apps;
    let (plane, admin, audit_log) = start_plane(work, settings.controller_manager).await?;
    let bench = Bench {
        tether_kubeconfig: plane.user_kubeconfig("tether", &["system:masters"]),
        kubectl_kubeconfig: plane.user_kubeconfig("kubectl-bench", &["system:masters"]),
        admin,
        audit_log,
        work: work.to_path_buf(),
        repo: Repo::at(&work.join("repo")),
        all_dir: work.join("kubectl-all"),
    };
    say(&format!(
        "writing the Git repository: {n} apps × {OBJECTS_PER_APP} objects"
    ));
    let mut files = repo_files(n);
    files.extend(latency_files(LATENCY_OBJECTS, 0));
    let head = bench.repo.commit(&files, "bench apps");
    for i in 0..n {
        let text: Vec<String> = app_files(&app_name(i), Some(&format!("k1-{i:03}")))
            .into_iter()
            .map(|(_, text)| text)
            .collect();
        std::fs::create_dir_all(&bench.all_dir)?;
        std::fs::write(
            bench.all_dir.join(format!("{}.yaml", app_name(i))),
            text.join("---\n"),
        )?;
    }

    say("creating namespaces");
    let mut namespaces = vec!["bench-latency".to_string()];
    for i in 0..n {
        namespaces.extend([
            initial(n).namespace(i),
            format!("kc-{i:03}"),
            format!("k1-{i:03}"),
        ]);
    }
    create_namespaces(&bench.admin, &namespaces).await?;

    let tether = measure_tether(&bench, tether_bin, &head, settings).await?;
    let kubectl = measure_kubectl(&bench, n).await;
    print(&tether, &kubectl, settings);
    println!("work directory (audit log, tether.log): {}", work.display());
    Ok(())
}

/// The `n` apps Tether syncs: `tt-NNN`, labelled `bench=initial`.
fn initial(n: usize) -> AppSet {
    AppSet {
        prefix: "tt".into(),
        label: "initial".into(),
        n,
        service_account: None,
    }
}

/// The cluster, the repository and the files both sides apply.
struct Bench {
    admin: kube::Client,
    audit_log: PathBuf,
    tether_kubeconfig: PathBuf,
    kubectl_kubeconfig: PathBuf,
    work: PathBuf,
    repo: Repo,
    /// Every app's objects, one file an app, for one `kubectl apply`.
    all_dir: PathBuf,
}

/// What Tether did, from its first Application to its last commit.
struct TetherFigures {
    pid: u32,
    sync: Duration,
    healthy: Duration,
    settle: Duration,
    initial: Counts,
    rollout: Counts,
    settling: Counts,
    steady: Counts,
    latencies: Vec<Duration>,
    unlisted: Vec<Duration>,
    recorded_lag: Duration,
    rss: f64,
    hwm: f64,
}

/// Initial sync, steady state, memory and commit-to-Synced latency of a
/// `tether run` process, which is stopped after.
async fn measure_tether(
    bench: &Bench,
    tether_bin: &Path,
    head: &str,
    settings: &Settings,
) -> anyhow::Result<TetherFigures> {
    let (n, admin, repo) = (settings.apps, &bench.admin, &bench.repo);
    say("starting `tether run` as its own process");
    let (tether, http_addr) = start_leading(
        tether_bin,
        admin,
        &bench.tether_kubeconfig,
        &bench.work,
        settings.resync_seconds,
    )
    .await?;

    // 1. Initial sync.
    say(&format!(
        "Tether: creating {n} Applications and waiting for Synced"
    ));
    let from = Timestamp::now();
    let started = Instant::now();
    create_apps(admin, &repo.url(), &initial(n)).await?;
    wait_synced(admin, "bench=initial", n, head).await?;
    let sync = started.elapsed();
    let all_synced = Timestamp::now();

    // 2. Steady state.
    // Nothing is changing only once the Deployments have rolled out (the
    // controller-manager writes their status until then, and each write
    // rightly costs Tether a comparison): wait for Healthy, then settle.
    say("waiting for all Applications Healthy (Deployments rolled out)");
    wait_healthy(admin, "bench=initial", n, head).await?;
    let healthy = started.elapsed();
    let healthy_at = Timestamp::now();
    let settle = Duration::from_secs(10);
    say(&format!(
        "steady state: settling {}s, then counting for {}s (resync every {}s)",
        settle.as_secs(),
        settings.steady_seconds,
        settings.resync_seconds
    ));
    tokio::time::sleep(settle).await;
    let (steady_from, steady_to) =
        audit::window(Duration::from_secs(settings.steady_seconds)).await;

    // 4. Memory, with everything synced.
    let (rss, hwm) = memory(tether.pid())?;

    // 3. Commit-to-Synced latency after a webhook.
    say(&format!(
        "latency: {} commits to a {LATENCY_OBJECTS}-object app, each announced by a webhook",
        settings.commits
    ));
    let latencies = latency(admin, repo, head, http_addr, 1, settings.commits, true).await?;
    say("latency again, with pushes that do not list the files they changed");
    let synced_to = repo.head();
    let unlisted = latency(
        admin,
        repo,
        &synced_to,
        http_addr,
        settings.commits + 1,
        settings.commits,
        false,
    )
    .await?;
    // The other apps of the repository record each new commit in the
    // background lane; how far behind is the last one?
    let last_push =
        Instant::now() - unlisted.last().copied().unwrap_or_default() - Duration::from_millis(500);
    wait_synced(admin, "bench=initial", n, &repo.head()).await?;
    let recorded_lag = last_push.elapsed();

    let log = &bench.audit_log;
    let figures = TetherFigures {
        pid: tether.pid(),
        sync,
        healthy,
        settle,
        initial: audit::count(log, "tether", from, all_synced).await,
        rollout: audit::count(log, "tether", all_synced, healthy_at).await,
        settling: audit::count(log, "tether", healthy_at, steady_from).await,
        steady: audit::count(log, "tether", steady_from, steady_to).await,
        latencies,
        unlisted,
        recorded_lag,
        rss,
        hwm,
    };
    tether.stop()?;
    Ok(figures)
}

/// What `kubectl apply --server-side` did with the same objects.
struct KubectlFigures {
    sequential: Duration,
    per_app: Vec<Duration>,
    sequential_counts: Counts,
    one: Duration,
    one_counts: Counts,
}

/// The same objects applied by kubectl, once an app at a time and once in
/// one call, after Tether has stopped.
async fn measure_kubectl(bench: &Bench, n: usize) -> KubectlFigures {
    say(&format!(
        "kubectl: {n} × `kubectl apply --server-side -n NS -f apps/APP/`"
    ));
    let kubectl = Kubectl {
        kubeconfig: bench.kubectl_kubeconfig.clone(),
        cache: bench.work.join("kubectl-cache"),
    };
    kubectl.run(&["api-resources"]); // a warm discovery cache, as a CI runner would have
    let from = Timestamp::now();
    let started = Instant::now();
    let mut per_app = Vec::with_capacity(n);
    for i in 0..n {
        let one = Instant::now();
        let dir = bench.repo.dir.join("apps").join(app_name(i));
        let ns = format!("kc-{i:03}");
        kubectl.apply(&["-n", &ns, "-f", &dir.to_string_lossy()]);
        per_app.push(one.elapsed());
    }
    let sequential = started.elapsed();
    let sequential_counts =
        audit::count(&bench.audit_log, "kubectl-bench", from, Timestamp::now()).await;

    say("kubectl: one `kubectl apply --server-side -f` for all apps");
    let from = Timestamp::now();
    let started = Instant::now();
    kubectl.apply(&["-f", &bench.all_dir.to_string_lossy()]);
    let one = started.elapsed();
    let one_counts = audit::count(&bench.audit_log, "kubectl-bench", from, Timestamp::now()).await;
    KubectlFigures {
        sequential,
        per_app,
        sequential_counts,
        one,
        one_counts,
    }
}

/// The figures, side by side.
fn print(tether: &TetherFigures, kubectl: &KubectlFigures, settings: &Settings) {
    let n = settings.apps;
    let objects = n * OBJECTS_PER_APP;
    println!();
    println!(
        "Tether benchmark — {n} apps × {OBJECTS_PER_APP} objects = {objects} objects, one kube-local"
    );
    println!(
        "(controller-manager + fake kubelet: {}; 2-core shared machine; times are wall clock)",
        settings.controller_manager
    );
    println!();
    println!("1. Initial sync");
    println!(
        "   Tether (concurrency 16, own process)     {:>8.1} s   {:>6.0} objects/s",
        secs(tether.sync),
        objects as f64 / secs(tether.sync)
    );
    println!(
        "   kubectl apply --server-side, per app     {:>8.1} s   {:>6.0} objects/s   (median {:.0} ms/app)",
        secs(kubectl.sequential),
        objects as f64 / secs(kubectl.sequential),
        median_ms(&mut kubectl.per_app.clone())
    );
    println!(
        "   kubectl apply --server-side, one call    {:>8.1} s   {:>6.0} objects/s",
        secs(kubectl.one),
        objects as f64 / secs(kubectl.one)
    );
    println!(
        "   ratio kubectl per app / Tether           {:>8.2}×   (target ≥ 3×)",
        secs(kubectl.sequential) / secs(tether.sync)
    );
    println!(
        "   ratio kubectl one call / Tether          {:>8.2}×",
        secs(kubectl.one) / secs(tether.sync)
    );
    print_counts("Tether requests", &tether.initial, objects);
    print_counts(
        "kubectl per app requests",
        &kubectl.sequential_counts,
        objects,
    );
    print_counts("kubectl one call requests", &kubectl.one_counts, objects);
    println!();
    println!(
        "   (all Healthy, i.e. Deployments rolled out, after {:.1} s)",
        secs(tether.healthy)
    );
    println!();
    println!("2. Steady state (after all Synced and Healthy)");
    println!("   while Deployments rolled out: {}", tether.rollout.line());
    println!(
        "   first {}s (settling): {}",
        tether.settle.as_secs(),
        tether.settling.line()
    );
    println!(
        "   next {}s: {} request(s) beyond watches and Lease renewals (target 0)",
        settings.steady_seconds,
        tether.steady.beyond_watches_and_lease().total()
    );
    println!("     by verb: {}", tether.steady.line());
    println!();
    println!(
        "3. Commit-to-Synced after a push webhook ({LATENCY_OBJECTS}-object app, {} commits)",
        tether.latencies.len()
    );
    for (what, latencies) in [
        (
            "push listing its files (as GitHub sends)",
            &tether.latencies,
        ),
        ("push without file lists (worst case)   ", &tether.unlisted),
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
        tether.recorded_lag.as_secs_f64()
    );
    println!();
    println!(
        "4. Controller memory with {objects} objects synced (tether run, pid {})",
        tether.pid
    );
    println!(
        "   VmRSS {:.1} MB   VmHWM (peak) {:.1} MB   (target < 100 MB)",
        tether.rss, tether.hwm
    );
    println!();
}

fn median_ms(values: &mut [Duration]) -> f64 {
    values.sort();
    percentile_ms(values, 0.5)
}

fn print_counts(what: &str, counts: &Counts, objects: usize) {
    println!(
        "   {what}: {} ({:.1} per object): {}",
        counts.total(),
        counts.total() as f64 / objects as f64,
        counts.line()
    );
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
