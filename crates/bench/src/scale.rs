//! `tether-bench --scale 100,200,500,1000`: the controller's memory as the
//! managed objects grow, then, at the largest step, the steady state and
//! drift-to-healed latency. No kubectl comparison.
//!
//! One `tether run` process; apps are added step by step (10 objects
//! each), and after each step — every app Synced and Healthy, then a
//! settling pause — its VmRSS is read from /proc. The slope is the
//! least-squares line through those points. Then the API requests of a
//! quiet window are counted from the audit log, and `--drifts` ConfigMaps
//! of different apps are patched one after another as another field
//! manager (`kubectl patch`'s merge patch): the time from the patch's
//! answer until a watch sees Tether's value back.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

use crate::apps::{AppSet, app_name, create_apps, create_namespaces, wait_healthy, wait_synced};
use crate::tether::start_leading;
use crate::workload::{OBJECTS_PER_APP, repo_files};
use tether_testkit::Repo;

use crate::{audit, memory, percentiles, resident_split, say, start_plane};

/// What `--scale` runs.
pub struct Settings {
    /// Apps after each step, ascending.
    pub steps: Vec<usize>,
    pub steady_seconds: u64,
    pub resync_seconds: u64,
    pub controller_manager: bool,
    /// Changes measured for drift-to-healed latency.
    pub drifts: usize,
    /// How long to wait after each step before reading memory.
    pub settle: Duration,
}

/// Memory after one step.
struct Point {
    objects: usize,
    rss: f64,
    hwm: f64,
    /// VmRSS's anonymous and file-backed parts.
    anon: f64,
    file: f64,
}

impl Point {
    /// Process `pid`'s memory now, managing `objects`.
    fn read(pid: u32, objects: usize) -> anyhow::Result<Point> {
        let (rss, hwm) = memory(pid)?;
        let (anon, file) = resident_split(pid)?;
        Ok(Point {
            objects,
            rss,
            hwm,
            anon,
            file,
        })
    }
}

/// What one run measured.
struct Figures {
    pid: u32,
    idle: Point,
    points: Vec<Point>,
    steady: audit::Counts,
    steady_rss: f64,
    /// Drift-to-healed latencies, ascending.
    healed: Vec<Duration>,
    after_drift: Point,
}

pub async fn run(tether_bin: &Path, work: &Path, settings: &Settings) -> anyhow::Result<()> {
    let Some(&most) = settings.steps.last() else {
        bail!("--scale: no steps");
    };
    let figures = measure(tether_bin, work, settings, most).await?;
    print(&figures, settings, most);
    println!("work directory (audit log, tether.log): {}", work.display());
    Ok(())
}

/// Runs the steps up to `most` apps, then the steady window and the drifts.
async fn measure(
    tether_bin: &Path,
    work: &Path,
    settings: &Settings,
    most: usize,
) -> anyhow::Result<Figures> {
    let (plane, admin, audit_log) = start_plane(work, settings.controller_manager).await?;
    let tether_kubeconfig = plane.user_kubeconfig("tether", &["system:masters"]);

    say(&format!(
        "writing the Git repository: {most} apps × {OBJECTS_PER_APP} objects"
    ));
    let repo = Repo::at(&work.join("repo"));
    let head = repo.commit(&repo_files(most), "bench apps");
    say(&format!("creating {most} namespaces"));
    create_namespaces(&admin, &app_set(most).namespaces()).await?;

    say("starting `tether run` as its own process");
    let (tether, _) = start_leading(
        tether_bin,
        &admin,
        &tether_kubeconfig,
        work,
        settings.resync_seconds,
    )
    .await?;
    let pid = tether.pid();
    let idle = Point::read(pid, 0)?;
    say(&format!("idle: VmRSS {:.1} MB", idle.rss));

    let mut points = Vec::with_capacity(settings.steps.len());
    for &n in &settings.steps {
        let started = Instant::now();
        say(&format!("step: {n} apps ({} objects)", n * OBJECTS_PER_APP));
        create_apps(&admin, &repo.url(), &app_set(n)).await?;
        wait_synced(&admin, "bench=scale", n, &head).await?;
        let synced = started.elapsed();
        if settings.controller_manager {
            wait_healthy(&admin, "bench=scale", n, &head).await?;
        }
        tokio::time::sleep(settings.settle).await;
        let point = Point::read(pid, n * OBJECTS_PER_APP)?;
        say(&format!(
            "  synced in {:.1} s, healthy in {:.1} s; VmRSS {:.1} MB, VmHWM {:.1} MB",
            synced.as_secs_f64(),
            started.elapsed().as_secs_f64() - settings.settle.as_secs_f64(),
            point.rss,
            point.hwm
        ));
        points.push(point);
    }

    say(&format!(
        "steady state: counting for {}s",
        settings.steady_seconds
    ));
    let (steady_from, steady_to) =
        audit::window(Duration::from_secs(settings.steady_seconds)).await;
    let (steady_rss, _) = memory(pid)?;

    say(&format!(
        "drift: {} ConfigMaps patched by another manager",
        settings.drifts
    ));
    let mut healed = drift(&admin, most, settings.drifts).await?;
    healed.sort();
    let after_drift = Point::read(pid, most * OBJECTS_PER_APP)?;

    let steady = audit::count(&audit_log, "tether", steady_from, steady_to).await;
    tether.stop()?;
    Ok(Figures {
        pid,
        idle,
        points,
        steady,
        steady_rss,
        healed,
        after_drift,
    })
}

/// The first `n` apps of the bench, labelled `bench=scale`.
fn app_set(n: usize) -> AppSet {
    AppSet {
        prefix: "sc".into(),
        label: "scale".into(),
        n,
        service_account: None,
    }
}

fn print(figures: &Figures, settings: &Settings, most: usize) {
    let Figures { pid, idle, .. } = figures;
    let objects = most * OBJECTS_PER_APP;
    println!();
    println!("Tether at scale — up to {most} apps × {OBJECTS_PER_APP} objects, one kube-local");
    println!(
        "(controller-manager + fake kubelet: {}; 2-core shared machine)",
        settings.controller_manager
    );
    println!();
    println!("1. Controller memory (tether run, pid {pid}; all apps Synced and Healthy)");
    println!(
        "   {:>8}  {:>9}  {:>9}  {:>9}  {:>9}",
        "objects", "VmRSS MB", "VmHWM MB", "anon MB", "file MB"
    );
    println!(
        "   {:>8}  {:>9.1}  {:>9}  {:>9.1}  {:>9.1}",
        0, idle.rss, "", idle.anon, idle.file
    );
    for p in &figures.points {
        println!(
            "   {:>8}  {:>9.1}  {:>9.1}  {:>9.1}  {:>9.1}",
            p.objects, p.rss, p.hwm, p.anon, p.file
        );
    }
    println!("   (anon: heap and stacks; file: the binary's own code and read-only data pages)");
    if let Some((slope, intercept)) = slope(&figures.points) {
        println!(
            "   slope {slope:.2} MB per 1,000 objects (least squares over the steps; intercept {intercept:.1} MB)"
        );
    }
    println!();
    println!(
        "2. Steady state at {objects} objects: {} request(s) beyond watches and Lease renewals in {}s (target 0)",
        figures.steady.beyond_watches_and_lease().total(),
        settings.steady_seconds
    );
    println!("     by verb: {}", figures.steady.line());
    println!();
    println!(
        "3. Drift at {objects} objects: {} merge patches of a managed ConfigMap value, each of another app",
        figures.healed.len()
    );
    println!(
        "   patch answered → Tether's value back: {}   (target p99 < 200 ms)",
        percentiles(&figures.healed)
    );
    println!(
        "   VmRSS {:.1} MB after the steady window, {:.1} MB after the drifts (VmHWM {:.1} MB)",
        figures.steady_rss, figures.after_drift.rss, figures.after_drift.hwm
    );
    println!();
}

/// Patches `data.index` of ConfigMap `config-0` of `changes` apps spread
/// over `apps` as field manager `kubectl-patch`, one at a time, and times
/// each from the patch's answer until a watch sees the value Git says.
async fn drift(admin: &kube::Client, apps: usize, changes: usize) -> anyhow::Result<Vec<Duration>> {
    let mut healed = Vec::with_capacity(changes);
    for change in 0..changes {
        let i = change * apps / changes.max(1);
        let app = app_name(i);
        let namespace = format!("sc-{i:03}");
        let name = format!("{app}-config-0");
        let configs: Api<ConfigMap> = Api::namespaced(admin.clone(), &namespace);
        let selector = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let mut events = watcher(configs.clone(), selector).applied_objects().boxed();
        // The watch's first list, before the change.
        events
            .next()
            .await
            .context("watch ended")?
            .with_context(|| format!("ConfigMap {namespace}/{name}: watching"))?;
        let value = format!("drift-{change}");
        let patch = json!({"data": {"index": value}});
        configs
            .patch(
                &name,
                &PatchParams {
                    field_manager: Some("kubectl-patch".into()),
                    ..PatchParams::default()
                },
                &Patch::Merge(&patch),
            )
            .await
            .with_context(|| format!("ConfigMap {namespace}/{name}: patching"))?;
        let done = Instant::now();
        let deadline = tokio::time::sleep(Duration::from_secs(30));
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                event = events.next() => {
                    let config = event.context("watch ended")??;
                    let index = config.data.unwrap_or_default().get("index").cloned();
                    if index.as_deref() == Some("0") {
                        healed.push(done.elapsed());
                        break;
                    }
                }
                () = &mut deadline => bail!("ConfigMap {namespace}/{name}: not healed 30 s after the patch"),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(healed)
}

/// The least-squares line through the points: MB per 1,000 objects and
/// the intercept.
fn slope(points: &[Point]) -> Option<(f64, f64)> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let xs: Vec<f64> = points.iter().map(|p| p.objects as f64 / 1000.0).collect();
    let mean_x = xs.iter().sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.rss).sum::<f64>() / n;
    let sxy: f64 = xs
        .iter()
        .zip(points)
        .map(|(x, p)| (x - mean_x) * (p.rss - mean_y))
        .sum();
    let sxx: f64 = xs.iter().map(|x| (x - mean_x).powi(2)).sum();
    (sxx > 0.0).then(|| {
        let slope = sxy / sxx;
        (slope, mean_y - slope * mean_x)
    })
}
