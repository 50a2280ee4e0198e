//! `tether-bench --flux`: Tether side by side with Flux (source-controller
//! and kustomize-controller, built from their Go modules by
//! `scripts/build-flux.sh`, run as host processes) on one kube-local, with
//! one Git repository served over smart HTTP on 127.0.0.1.
//!
//! For each N of `--apps`, in one run: Tether, then Flux, each under its own
//! certificate user(s) (the audit log's key), each syncing the same N
//! repository paths into fresh namespaces of its own; then, per contender:
//!
//! 1. initial sync: from creating the N Applications (Kustomizations, after
//!    the GitRepository) to all applied at the head, and its CPU time;
//! 2. steady state: after a quiet spell, API requests per minute, CPU;
//! 3. drift → healed: a ConfigMap field changed in `--drifts` apps at once,
//!    the time until each is back (Flux heals only on its interval);
//! 4. commit → applied: `--commits` commits to a 50-object app, each
//!    announced (Tether: its push webhook; Flux: the GitRepository annotated
//!    with `reconcile.fluxcd.io/requestedAt`, what `flux reconcile` and the
//!    notification-controller's Receiver do), until that app has applied
//!    it; then until every app has (Flux reapplies all on a new revision);
//! 5. memory (RSS; Flux's is the sum of its two processes).
//!
//! It prints one table, both columns and the ratio Tether/Flux.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::bail;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use tether_controller::api::Application;
use tether_testkit::git_server::HttpBackend;
use tether_testkit::{ControlPlane, Repo, application};

use crate::apps::{
    AppSet, app_name, apply, create_apps, create_namespaces, delete_apps, synced_at,
};
use crate::audit::{self, Counts};
use crate::flux_controllers::{self as fc, Flux, Kustomization};
use crate::tether::{
    RunFlags, Tether, cpu_time, free_loopback_addr, wait_leading, write_webhook_secret,
};
use crate::workload::{OBJECTS_PER_APP, latency_files, repo_files};
use crate::{LATENCY_OBJECTS, memory, percentile_ms, post_push, say, secs, start_plane};

/// Quiet time between the initial sync and the steady-state window.
const SETTLE: Duration = Duration::from_secs(20);
/// How long one commit may take to reach every app before the next, at
/// least; a contender whose initial sync took longer gets twice that (a
/// saturated Flux works through its whole queue before it reaches an app).
const ALL_APPLIED_LIMIT: Duration = Duration::from_secs(240);
/// How long one app may take to apply a commit, at least (likewise).
const APPLIED_LIMIT: Duration = Duration::from_secs(300);
/// How long a drifted object may take to be healed, at least (likewise:
/// Flux heals on its interval, once its queue reaches the app).
const HEAL_LIMIT: Duration = Duration::from_secs(600);

pub struct Settings {
    pub apps: Vec<usize>,
    pub steady_seconds: u64,
    pub resync_seconds: u64,
    pub commits: usize,
    pub drifts: usize,
    /// Flux's `spec.interval` (GitRepository and Kustomizations).
    pub interval: String,
    pub controller_manager: bool,
}

/// What every run shares.
struct Shared<'a> {
    plane: &'a ControlPlane,
    admin: kube::Client,
    audit_log: PathBuf,
    work: &'a Path,
    tether_bin: &'a Path,
    flux_dir: PathBuf,
    repo: Repo,
    url: String,
    secret_file: PathBuf,
    settings: &'a Settings,
    round: AtomicUsize,
}

impl Shared<'_> {
    /// Commits a change to the latency app and publishes it to the served
    /// repository; returns the commit.
    fn commit(&self) -> String {
        let round = self.round.fetch_add(1, Ordering::SeqCst) + 1;
        let commit = self.repo.commit(
            &latency_files(LATENCY_OBJECTS, round),
            &format!("round {round}"),
        );
        self.repo.publish("bench");
        commit
    }
}

/// One contender's figures at one N.
#[derive(Default)]
struct Figures {
    initial: Duration,
    initial_cpu: Duration,
    initial_requests: Counts,
    steady: Counts,
    steady_cpu: Duration,
    drift: Vec<Duration>,
    commit: Vec<Duration>,
    /// From each commit to every app applied, the median.
    commit_all: Vec<Duration>,
    rss_mb: f64,
}

pub async fn run(tether_bin: &Path, work: &Path, settings: &Settings) -> anyhow::Result<()> {
    say("building (or finding) Flux: scripts/build-flux.sh");
    let flux_dir = fc::build()?;
    let (plane, admin, audit_log) = start_plane(work, settings.controller_manager).await?;
    fc::install_crds(&flux_dir, plane.kubeconfig())?;
    let max = settings.apps.iter().copied().max().unwrap_or(0);
    say(&format!(
        "writing the Git repository: {max} apps × {OBJECTS_PER_APP} objects, served over smart HTTP"
    ));
    let repo = Repo::at(&work.join("repo"));
    let mut files = repo_files(max);
    files.extend(latency_files(LATENCY_OBJECTS, 0));
    repo.commit(&files, "bench apps");
    let server = HttpBackend::start(&repo.publish("bench"), None);
    let secret_file = write_webhook_secret(work)?;
    let shared = Shared {
        plane: &plane,
        admin,
        audit_log,
        work,
        tether_bin,
        flux_dir,
        url: server.url("bench"),
        repo,
        secret_file,
        settings,
        round: AtomicUsize::new(0),
    };
    let mut rows = Vec::new();
    for &n in &settings.apps {
        let tether = tether_side(&shared, n).await?;
        print_figures("Tether", n, &tether, settings.steady_seconds);
        let flux = flux_side(&shared, n).await?;
        print_figures("Flux", n, &flux, settings.steady_seconds);
        rows.push((n, tether, flux));
    }
    print_table(&rows, settings);
    println!();
    println!("work directory (audit log, logs): {}", work.display());
    Ok(())
}

async fn tether_side(s: &Shared<'_>, n: usize) -> anyhow::Result<Figures> {
    let identity = format!("bench-n{n}");
    let user = format!("tether-n{n}");
    let kubeconfig = s.plane.user_kubeconfig(&user, &["system:masters"]);
    let set = AppSet {
        prefix: format!("t{n}"),
        label: format!("tether-{n}"),
        n,
        service_account: None,
    };
    let latency_ns = format!("t{n}-latency");
    let mut namespaces = set.namespaces();
    namespaces.push(latency_ns.clone());
    create_namespaces(&s.admin, &namespaces).await?;
    let http_addr = free_loopback_addr()?;
    say(&format!("N={n}: starting tether run"));
    let tether = Tether::start(
        s.tether_bin,
        &RunFlags {
            kubeconfig: &kubeconfig,
            identity: &identity,
            resync_seconds: s.settings.resync_seconds,
            http_addr,
            webhook_secret_file: &s.secret_file,
            cache_dir: s.work.join(format!("cache-{identity}")),
            log: s.work.join(format!("tether-{identity}.log")),
        },
    )?;
    wait_leading(&s.admin, &identity).await?;
    let pids = [tether.pid()];

    // 1. Initial sync.
    let head = s.repo.head();
    let cpu_before = cpu_of(&pids)?;
    let from = Timestamp::now();
    let started = Instant::now();
    create_apps(&s.admin, &s.url, &set).await?;
    crate::apps::wait_synced(&s.admin, &set.selector(), n, &head).await?;
    let initial = started.elapsed();
    let initial_cpu = cpu_of(&pids)? - cpu_before;
    let synced = Timestamp::now();
    say(&format!("N={n}: Tether synced in {:.1} s", secs(initial)));

    // The latency app, then 2. the steady state.
    let latency_label = format!("tether-{n}-latency");
    let apps: Api<Application> = Api::namespaced(s.admin.clone(), &latency_ns);
    let app =
        application("latency", &latency_ns, &s.url, "apps/latency").label("bench", &latency_label);
    apply(&apps, "latency", app.manifest()).await?;
    crate::apps::wait_synced(&s.admin, &format!("bench={latency_label}"), 1, &head).await?;
    let (steady_from, steady_to, steady_cpu) = steady(s, &pids).await?;
    let (rss_mb, _) = memory(tether.pid())?;

    // 3. Drift.
    let drift = heal_times(s, &victims(&set.prefix, n, s.settings.drifts), HEAL_LIMIT).await?;

    // 4. Commits, each announced by a push webhook.
    let mut commit = Vec::new();
    let mut commit_all = Vec::new();
    for _ in 0..s.settings.commits {
        let id = s.commit();
        let started = Instant::now();
        let status = post_push(http_addr, &s.url, Some(s.repo.changed(&id)))?;
        if status != 202 {
            bail!("Tether's webhook answered {status}");
        }
        poll(Duration::from_secs(120), || async {
            Ok(apps.get("latency").await.is_ok_and(|a| synced_at(&a, &id)))
        })
        .await?;
        commit.push(started.elapsed());
        crate::apps::wait_synced(&s.admin, &set.selector(), n, &id).await?;
        commit_all.push(started.elapsed());
    }

    tether.stop()?;
    delete_apps(&s.admin, &set).await?;
    let _ = apps.delete("latency", &DeleteParams::default()).await;
    let [initial_requests, steady] = audit::count_windows(
        &s.audit_log,
        &user,
        [(from, synced), (steady_from, steady_to)],
    )
    .await;
    Ok(Figures {
        initial,
        initial_cpu,
        initial_requests,
        steady,
        steady_cpu,
        drift,
        commit,
        commit_all,
        rss_mb,
    })
}

async fn flux_side(s: &Shared<'_>, n: usize) -> anyhow::Result<Figures> {
    let ns = format!("flux-n{n}");
    let prefix = format!("f{n}");
    let label = format!("flux-{n}");
    let latency_label = format!("flux-{n}-latency");
    let users = [format!("flux-source-n{n}"), format!("flux-kustomize-n{n}")];
    let kubeconfigs = [
        s.plane.user_kubeconfig(&users[0], &["system:masters"]),
        s.plane.user_kubeconfig(&users[1], &["system:masters"]),
    ];
    let list: Vec<Kustomization> = (0..n)
        .map(|i| Kustomization {
            name: app_name(i),
            path: format!("./apps/{}", app_name(i)),
            target_namespace: format!("{prefix}-{i:03}"),
        })
        .collect();
    let mut namespaces: Vec<String> = list.iter().map(|k| k.target_namespace.clone()).collect();
    namespaces.extend([ns.clone(), format!("{prefix}-latency")]);
    create_namespaces(&s.admin, &namespaces).await?;
    say(&format!(
        "N={n}: starting source-controller and kustomize-controller"
    ));
    let dir = s.work.join(format!("flux-n{n}"));
    let flux = Flux::start(&fc::Start {
        flux: &s.flux_dir,
        namespace: &ns,
        kubeconfigs: [&kubeconfigs[0], &kubeconfigs[1]],
        dir: &dir,
    })
    .await?;
    let pids = flux.pids();
    let interval = &s.settings.interval;

    // 1. Initial sync.
    let head = s.repo.head();
    let cpu_before = cpu_of(&pids)?;
    let from = Timestamp::now();
    let started = Instant::now();
    fc::create_git_repository(&s.admin, &ns, &s.url, interval).await?;
    fc::create_kustomizations(&s.admin, &ns, &label, interval, &list).await?;
    fc::wait_applied(&s.admin, &ns, &label, n, &head, Duration::from_secs(1800)).await?;
    let initial = started.elapsed();
    let initial_cpu = cpu_of(&pids)? - cpu_before;
    let synced = Timestamp::now();
    say(&format!("N={n}: Flux applied in {:.1} s", secs(initial)));

    // The latency app, then 2. the steady state.
    let latency = Kustomization {
        name: "latency".into(),
        path: "./apps/latency".into(),
        target_namespace: format!("{prefix}-latency"),
    };
    fc::create_kustomizations(&s.admin, &ns, &latency_label, interval, &[latency]).await?;
    let limit = APPLIED_LIMIT.max(initial * 2);
    fc::wait_applied(&s.admin, &ns, &latency_label, 1, &head, limit).await?;
    let (steady_from, steady_to, steady_cpu) = steady(s, &pids).await?;
    let rss_mb = pids
        .iter()
        .map(|pid| memory(*pid).map(|(rss, _)| rss))
        .sum::<anyhow::Result<f64>>()?;

    // 3. Drift.
    let heal_limit = HEAL_LIMIT.max(initial * 2);
    let drift = heal_times(s, &victims(&prefix, n, s.settings.drifts), heal_limit).await?;

    // 4. Commits, each announced by annotating the GitRepository.
    let kustomizations = fc::kustomizations(&s.admin, &ns);
    let mut commit = Vec::new();
    let mut commit_all = Vec::new();
    for _ in 0..s.settings.commits {
        let id = s.commit();
        let started = Instant::now();
        fc::request_reconcile(&s.admin, &ns).await?;
        poll(limit, || async {
            Ok(kustomizations
                .get("latency")
                .await
                .is_ok_and(|k| fc::applied_at(&k, &id)))
        })
        .await?;
        commit.push(started.elapsed());
        let all_limit = ALL_APPLIED_LIMIT.max(initial * 2);
        match fc::wait_applied(&s.admin, &ns, &label, n, &id, all_limit).await {
            Ok(()) => commit_all.push(started.elapsed()),
            Err(error) => say(&format!("{error}; going on")),
        }
    }

    fc::suspend_all(&s.admin, &ns).await?;
    flux.stop();
    let windows = [(from, synced), (steady_from, steady_to)];
    let mut initial_requests = Counts::default();
    let mut steady_counts = Counts::default();
    for user in &users {
        let [initial, steady] = audit::count_windows(&s.audit_log, user, windows).await;
        initial_requests = initial_requests.plus(&initial);
        steady_counts = steady_counts.plus(&steady);
    }
    Ok(Figures {
        initial,
        initial_cpu,
        initial_requests,
        steady: steady_counts,
        steady_cpu,
        drift,
        commit,
        commit_all,
        rss_mb,
    })
}

/// Settles, then counts a steady-state window; returns it and the CPU
/// time `pids` used in it.
async fn steady(s: &Shared<'_>, pids: &[u32]) -> anyhow::Result<(Timestamp, Timestamp, Duration)> {
    say(&format!(
        "settling {} s, then counting {} s",
        SETTLE.as_secs(),
        s.settings.steady_seconds
    ));
    tokio::time::sleep(SETTLE).await;
    let cpu_before = cpu_of(pids)?;
    let (from, to) = audit::window(Duration::from_secs(s.settings.steady_seconds)).await;
    Ok((from, to, cpu_of(pids)? - cpu_before))
}

/// The CPU time `pids` have used so far, together.
fn cpu_of(pids: &[u32]) -> anyhow::Result<Duration> {
    pids.iter().map(|pid| cpu_time(*pid)).sum()
}

/// `count` apps spread over the N (namespace `PREFIX-NNN`), each with its
/// ConfigMap `app-NNN-config-0` to drift.
fn victims(prefix: &str, n: usize, count: usize) -> Vec<(String, String)> {
    let count = count.min(n).max(1);
    (0..count)
        .map(|j| {
            let i = j * n / count;
            (
                format!("{prefix}-{i:03}"),
                format!("{}-config-0", app_name(i)),
            )
        })
        .collect()
}

/// Changes `data.index` of each victim ConfigMap (as the admin user, all at
/// once) and returns how long each took to be back at Git's value, `"0"`,
/// failing when one is not back within `limit`.
async fn heal_times(
    s: &Shared<'_>,
    victims: &[(String, String)],
    limit: Duration,
) -> anyhow::Result<Vec<Duration>> {
    say(&format!("drifting {} ConfigMaps", victims.len()));
    let patch = json!({"data": {"index": "drifted"}});
    let mut pending = Vec::new();
    for (ns, name) in victims {
        let api: Api<ConfigMap> = Api::namespaced(s.admin.clone(), ns);
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        pending.push((api, name.clone(), Instant::now()));
    }
    let deadline = Instant::now() + limit;
    let mut healed = Vec::new();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for (api, name, at) in pending {
            let value = api
                .get(&name)
                .await?
                .data
                .and_then(|d| d.get("index").cloned());
            match value.as_deref() {
                Some("0") => healed.push(at.elapsed()),
                _ => still.push((api, name, at)),
            }
        }
        pending = still;
        if Instant::now() > deadline {
            bail!(
                "{} drifted ConfigMaps not healed within {} s",
                pending.len(),
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(healed)
}

/// Polls `done` every 50 ms until it holds or `limit` has passed.
async fn poll<F, Fut>(limit: Duration, done: F) -> anyhow::Result<()>
where
    F: Fn() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + limit;
    while !done().await? {
        if Instant::now() > deadline {
            bail!("not applied within {} s", limit.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

fn sorted(values: &[Duration]) -> Vec<Duration> {
    let mut values = values.to_vec();
    values.sort();
    values
}

fn per_minute(count: u64, seconds: u64) -> f64 {
    count as f64 * 60.0 / seconds as f64
}

fn print_figures(who: &str, n: usize, f: &Figures, steady_seconds: u64) {
    println!(
        "{who} N={n}: initial {:.1} s (CPU {:.1} s, {} requests); steady {} s: {} requests, CPU {:.2} s, RSS {:.1} MB",
        secs(f.initial),
        secs(f.initial_cpu),
        f.initial_requests.total(),
        steady_seconds,
        f.steady.total(),
        secs(f.steady_cpu),
        f.rss_mb
    );
    println!("   steady by verb: {}", f.steady.line());
    let ms = |v: &[Duration]| -> String {
        sorted(v)
            .iter()
            .map(|d| format!("{:.0}", d.as_secs_f64() * 1000.0))
            .collect::<Vec<_>>()
            .join(" ")
    };
    println!("   drift → healed (ms): {}", ms(&f.drift));
    println!("   commit → applied (ms): {}", ms(&f.commit));
    println!("   commit → every app applied (ms): {}", ms(&f.commit_all));
}

fn print_table(rows: &[(usize, Figures, Figures)], settings: &Settings) {
    let window = settings.steady_seconds;
    println!();
    println!(
        "Tether against Flux — one kube-local, one Git repository over smart HTTP (127.0.0.1), {OBJECTS_PER_APP} objects per app"
    );
    println!(
        "(Tether first, then Flux, fresh namespaces each; Flux interval {}, commits announced by reconcile.fluxcd.io/requestedAt)",
        settings.interval
    );
    println!(
        "(Tether renews its leader Lease; Flux runs with leader election off; Flux's memory and CPU are its two processes')"
    );
    println!(
        "   {:<44} {:>10} {:>10} {:>13}",
        "", "Tether", "Flux", "Tether/Flux"
    );
    for (n, t, f) in rows {
        println!("   N = {n}");
        let row = |what: &str, t: f64, f: f64, decimals: usize| {
            let ratio = match (t / f).is_finite() {
                true => format!("{:.3}", t / f),
                false => "—".into(),
            };
            println!("   {what:<44} {t:>10.decimals$} {f:>10.decimals$} {ratio:>13}");
        };
        row("initial sync (s)", secs(t.initial), secs(f.initial), 1);
        row(
            "  CPU seconds of the initial sync",
            secs(t.initial_cpu),
            secs(f.initial_cpu),
            1,
        );
        row(
            "  API requests of the initial sync",
            t.initial_requests.total() as f64,
            f.initial_requests.total() as f64,
            0,
        );
        for (what, tv, fv) in [
            ("commit → applied", &t.commit, &f.commit),
            ("drift → healed", &t.drift, &f.drift),
        ] {
            let (ts, fs) = (sorted(tv), sorted(fv));
            for p in [0.5, 0.99] {
                row(
                    &format!("{what} p{:.0} (ms)", p * 100.0),
                    percentile_ms(&ts, p),
                    percentile_ms(&fs, p),
                    0,
                );
            }
        }
        row(
            "commit → every app applied, median (ms)",
            percentile_ms(&sorted(&t.commit_all), 0.5),
            percentile_ms(&sorted(&f.commit_all), 0.5),
            0,
        );
        row(
            "steady API requests / min (all)",
            per_minute(t.steady.total(), window),
            per_minute(f.steady.total(), window),
            1,
        );
        row(
            "  beyond watches and Leases / min",
            per_minute(t.steady.beyond_watches_and_lease().total(), window),
            per_minute(f.steady.beyond_watches_and_lease().total(), window),
            1,
        );
        row(
            "steady CPU seconds / min",
            secs(t.steady_cpu) * 60.0 / window as f64,
            secs(f.steady_cpu) * 60.0 / window as f64,
            2,
        );
        row("RSS after the steady state (MB)", t.rss_mb, f.rss_mb, 1);
    }
    println!(
        "   ({} commits and {} drifted apps per contender and N; p99 of so few is their maximum)",
        settings.commits, settings.drifts
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drifted_apps_are_spread_over_the_n_and_never_more_than_n() {
        let spread = victims("f500", 500, 5);
        let namespaces: Vec<&str> = spread.iter().map(|(ns, _)| ns.as_str()).collect();
        assert_eq!(
            namespaces,
            ["f500-000", "f500-100", "f500-200", "f500-300", "f500-400"]
        );
        assert_eq!(spread[1].1, "app-100-config-0");
        assert_eq!(victims("t3", 3, 10).len(), 3);
    }

    #[test]
    fn requests_per_minute_scale_the_window_to_sixty_seconds() {
        assert_eq!(per_minute(30, 120), 15.0);
    }
}
