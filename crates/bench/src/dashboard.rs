//! `tether-bench --dashboard`: the web dashboard with many Applications.
//!
//! A real `tether run` syncs `--apps` apps (10 objects each, self-heal off
//! so drift stays visible); then `tether dashboard -A` serves them. The
//! figures:
//!
//! - start: process start → its first list done and listening;
//! - first paint: `GET /` (the whole server-rendered overview) on a fresh
//!   connection, median and slowest of [`PAGE_LOADS`], and its size;
//! - a status change reflected: a Deployment of one app is scaled; from
//!   the moment the bench (polling every 10 ms) sees the app OutOfSync, how long
//!   until the dashboard's server-sent `change` event arrives and the
//!   live part it makes a browser fetch (`live?q=NAME`) shows OutOfSync —
//!   [`CHANGES`] times, median and slowest (and, separately, the
//!   controller's own scale → OutOfSync time);
//! - the same in headless Chromium: the overview's first contentful
//!   paint, and a change shown in the row without reloading;
//! - the dashboard process's resident memory after all of that.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tether_controller::api::Application;
use tether_core::SyncStatus;
use tether_testkit::browser::Browser;
use tether_testkit::{Repo, application};

use crate::apps::{AppSet, app_name, apply, create_namespaces, run_all, wait_synced};
use crate::tether::{free_loopback_addr, start_leading};
use crate::workload::{OBJECTS_PER_APP, repo_files};
use crate::{memory, say, start_plane};

/// Overview loads timed.
const PAGE_LOADS: usize = 20;
/// Status changes timed.
const CHANGES: usize = 10;
/// Overview loads in the browser.
const BROWSER_LOADS: usize = 5;
/// Status changes watched in the browser.
const BROWSER_CHANGES: usize = 5;
/// The page's first contentful paint (else its first paint), in ms from
/// navigation start, as soon as the browser reports it.
const FIRST_PAINT: &str = "const done = arguments[arguments.length - 1]; \
     new PerformanceObserver((list, observer) => { \
       const paint = list.getEntriesByName('first-contentful-paint')[0] \
         || list.getEntriesByName('first-paint')[0]; \
       if (paint) { observer.disconnect(); done(paint.startTime); } \
     }).observe({type: 'paint', buffered: true}); \
     setTimeout(() => done(null), 5000);";

pub async fn run(
    tether_bin: &Path,
    work: &Path,
    n: usize,
    controller_manager: bool,
) -> anyhow::Result<()> {
    let (plane, admin, _audit) = start_plane(work, controller_manager).await?;
    let tether_kubeconfig = plane.user_kubeconfig("tether", &["system:masters"]);
    let viewer_kubeconfig = plane.user_kubeconfig("dashboard-viewer", &["system:masters"]);
    let set = AppSet {
        prefix: "db".into(),
        label: "dashboard".into(),
        n,
        service_account: None,
    };
    let _tether = start_leading(tether_bin, &admin, &tether_kubeconfig, work, 600).await?;
    let _repo = sync_apps(&admin, work, &set).await?;

    let address = free_loopback_addr()?;
    let spawned = Instant::now();
    let mut dashboard = Dashboard::start(tether_bin, &viewer_kubeconfig, address)?;
    dashboard.wait_listening(address, Duration::from_secs(60))?;
    let start_time = spawned.elapsed();
    let base = format!("http://{address}/");
    let bench = Changes {
        admin: &admin,
        set: &set,
    };

    let (loads, size) = page_loads(&base, n).await?;
    let [detected, reflected, end_to_end] = bench.seen_by_the_page(&base).await?;
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "dashboard ({n} Applications × {OBJECTS_PER_APP} objects, {build} build, debug kube-local)"
    );
    println!(
        "  start (first list + listening):   {:>8.0} ms",
        ms(start_time)
    );
    println!(
        "  first paint, GET / ({} KB):     {} (of {PAGE_LOADS})",
        size / 1024,
        spread(&loads),
    );
    println!(
        "  scale → page shows OutOfSync:     {} (of {CHANGES})",
        spread(&end_to_end),
    );
    println!(
        "    of which the controller (scale → status OutOfSync): median {:>6.1} ms",
        ms(detected[detected.len() / 2])
    );
    println!(
        "    and the dashboard (status seen → page shows it):   {}",
        spread(&reflected),
    );
    let (rss, hwm) = memory(dashboard.pid())?;
    println!("  dashboard memory before the browser: RSS {rss:.1} MB (peak {hwm:.1} MB)");

    say("the same in headless Chromium");
    let [paints, shown] = bench.seen_in_chromium(&base).await?;
    let (rss, hwm) = memory(dashboard.pid())?;
    println!(
        "  Chromium first contentful paint:  {} (of {BROWSER_LOADS})",
        spread(&paints),
    );
    println!(
        "  Chromium: status seen → row shows it: {} (of {BROWSER_CHANGES}; polled every 50 ms)",
        spread(&shown),
    );
    println!("  dashboard memory: RSS {rss:.1} MB (peak {hwm:.1} MB)");
    Ok(())
}

/// Writes the repository and creates `set`'s Applications (self-heal
/// off, so drift stays visible), waiting until all are Synced. The
/// repository is served as long as the returned one lives.
async fn sync_apps(admin: &kube::Client, work: &Path, set: &AppSet) -> anyhow::Result<Repo> {
    let n = set.n;
    say(&format!(
        "writing the Git repository: {n} apps × {OBJECTS_PER_APP} objects"
    ));
    let repo = Repo::at(&work.join("repo"));
    let head = repo.commit(&repo_files(n), "bench apps");
    create_namespaces(admin, &set.namespaces()).await?;
    say(&format!(
        "creating {n} Applications (self-heal off) and waiting for Synced"
    ));
    let started = Instant::now();
    run_all(
        8,
        (0..n).map(|i| {
            let (ns, name) = (set.namespace(i), app_name(i));
            let app = application(&name, &ns, &repo.url(), &format!("apps/{name}"))
                .label("bench", &set.label)
                .sync_policy(json!({"selfHeal": false}));
            let api: Api<Application> = Api::namespaced(admin.clone(), &ns);
            async move {
                let applied = apply(&api, &name, app.manifest()).await;
                applied.with_context(|| format!("Application {ns}/{name}"))
            }
        }),
    )
    .await?;
    wait_synced(admin, &set.selector(), n, &head).await?;
    say(&format!(
        "{n} apps Synced in {:.1}s",
        started.elapsed().as_secs_f64()
    ));
    Ok(repo)
}

/// [`PAGE_LOADS`] times `GET /` on a fresh connection (a browser's first
/// visit), sorted, and the page's size; an error unless it lists `n` rows.
async fn page_loads(base: &str, n: usize) -> anyhow::Result<(Vec<Duration>, usize)> {
    let mut loads = Vec::with_capacity(PAGE_LOADS);
    let mut size = 0;
    for _ in 0..PAGE_LOADS {
        let client = reqwest::Client::new();
        let began = Instant::now();
        let page = client.get(base).send().await?.error_for_status()?;
        let body = page.text().await?;
        loads.push(began.elapsed());
        size = body.len();
        let rows = body.matches("<tr data-app=").count();
        if rows != n {
            bail!("the overview lists {rows} rows, not {n}");
        }
    }
    loads.sort();
    Ok((loads, size))
}

/// Status changes made by scaling one app's Deployment, and seen.
struct Changes<'a> {
    admin: &'a kube::Client,
    set: &'a AppSet,
}

impl Changes<'_> {
    /// Scales app `i`'s Deployment to `replicas` and waits for its sync
    /// status to say `want`.
    async fn scale(&self, i: usize, replicas: i32, want: SyncStatus) -> anyhow::Result<()> {
        let (ns, name) = (self.set.namespace(i), app_name(i));
        let apps: Api<Application> = Api::namespaced(self.admin.clone(), &ns);
        let deployments: Api<Deployment> = Api::namespaced(self.admin.clone(), &ns);
        scale(&deployments, &name, replicas).await?;
        wait_sync(&apps, &name, want).await
    }

    /// [`CHANGES`] times: scale → status OutOfSync (the controller), status
    /// seen → the live part a `change` event makes a browser fetch shows it
    /// (the dashboard), and the two together; each sorted.
    async fn seen_by_the_page(&self, base: &str) -> anyhow::Result<[Vec<Duration>; 3]> {
        let client = reqwest::Client::new();
        let mut events = client.get(format!("{base}events")).send().await?;
        let (mut detected, mut reflected, mut end_to_end) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..CHANGES {
            let i = (round * 97 + 13) % self.set.n;
            let (ns, name) = (self.set.namespace(i), app_name(i));
            let scaled = Instant::now();
            self.scale(i, 3, SyncStatus::OutOfSync).await?;
            let seen = Instant::now();
            detected.push(seen - scaled);
            let live = format!("{base}live?q={name}");
            loop {
                // As a browser does: one fetch of the live part per event.
                next_change(&mut events).await?;
                let part = client.get(&live).send().await?.text().await?;
                if row_says(&part, &ns, &name, SyncStatus::OutOfSync.as_str()) {
                    break;
                }
                if seen.elapsed() > Duration::from_secs(30) {
                    bail!("the dashboard never showed {ns}/{name} OutOfSync");
                }
            }
            // The whole way (the controller's part and the dashboard's), and
            // the dashboard's part: from the bench's poll seeing the status
            // (up to 10 ms after it was written) to the page showing it.
            end_to_end.push(scaled.elapsed());
            reflected.push(seen.elapsed());
            self.scale(i, 1, SyncStatus::Synced).await?;
        }
        let mut figures = [detected, reflected, end_to_end];
        figures.iter_mut().for_each(|times| times.sort());
        Ok(figures)
    }

    /// In headless Chromium: the overview's first contentful paint
    /// ([`BROWSER_LOADS`] times), and status seen → the row shows it
    /// without reloading ([`BROWSER_CHANGES`] times); each sorted.
    async fn seen_in_chromium(&self, base: &str) -> anyhow::Result<[Vec<Duration>; 2]> {
        let browser = Browser::start(false).await;
        let mut paints = Vec::with_capacity(BROWSER_LOADS);
        for _ in 0..BROWSER_LOADS {
            browser.goto(base).await;
            let paint = browser
                .client
                .execute_async(FIRST_PAINT, Vec::new())
                .await?
                .as_f64()
                .context("the browser reported no first-contentful-paint")?;
            paints.push(Duration::from_secs_f64(paint / 1000.0));
        }
        browser
            .wait_text("#connection", Duration::from_secs(10), |t| {
                t.starts_with("Live")
            })
            .await;
        let mut shown = Vec::with_capacity(BROWSER_CHANGES);
        for round in 0..BROWSER_CHANGES {
            let i = (round * 131 + 7) % self.set.n;
            self.scale(i, 3, SyncStatus::OutOfSync).await?;
            let row = format!(
                "tr[data-app=\"{}/{}\"] td.sync",
                self.set.namespace(i),
                app_name(i)
            );
            let waited = browser.wait_text(&row, Duration::from_secs(10), |t| {
                t == SyncStatus::OutOfSync.as_str()
            });
            shown.push(waited.await);
            self.scale(i, 1, SyncStatus::Synced).await?;
        }
        paints.sort();
        shown.sort();
        Ok([paints, shown])
    }
}

/// `median M ms, slowest S ms` of `sorted`.
fn spread(sorted: &[Duration]) -> String {
    format!(
        "median {:>6.1} ms, slowest {:>6.1} ms",
        ms(sorted[sorted.len() / 2]),
        ms(sorted[sorted.len() - 1])
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn scale(deployments: &Api<Deployment>, name: &str, replicas: i32) -> anyhow::Result<()> {
    let patch = json!({"spec": {"replicas": replicas}});
    deployments
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("scaling Deployment {name}"))?;
    Ok(())
}

/// Polls (every 10 ms) until Application `name` has sync status `want`.
async fn wait_sync(apps: &Api<Application>, name: &str, want: SyncStatus) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let app = apps.get(name).await?;
        if app.status.as_ref().is_some_and(|s| s.sync.status == want) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("Application {name}: not {} after 60 s", want.as_str());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits for the next server-sent `change` event.
async fn next_change(events: &mut reqwest::Response) -> anyhow::Result<()> {
    loop {
        let chunk = events
            .chunk()
            .await?
            .context("the dashboard closed its event stream")?;
        if String::from_utf8_lossy(&chunk).contains("event: change") {
            return Ok(());
        }
    }
}

/// Whether the live part's row of `ns/name` reads `sync`.
fn row_says(part: &str, ns: &str, name: &str, sync: &str) -> bool {
    let Some(start) = part.find(&format!("data-app=\"{ns}/{name}\"")) else {
        return false;
    };
    let row = &part[start..];
    let row = &row[..row.find("</tr>").unwrap_or(row.len())];
    row.contains(&format!("<td class=\"sync\">{sync}</td>"))
}

/// `tether dashboard -A` as its own process; killed when dropped.
struct Dashboard {
    child: Child,
}

impl Dashboard {
    fn start(binary: &Path, kubeconfig: &Path, address: SocketAddr) -> anyhow::Result<Dashboard> {
        let child = Command::new(binary)
            .args(["dashboard", "-A", "--address", &address.to_string()])
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("{}: starting `tether dashboard`", binary.display()))?;
        Ok(Dashboard { child })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the dashboard accepts connections (it listens only once
    /// its first list is complete).
    fn wait_listening(&mut self, address: SocketAddr, within: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        while std::net::TcpStream::connect(address).is_err() {
            if let Some(status) = self.child.try_wait()? {
                bail!("`tether dashboard` exited: {status}");
            }
            if Instant::now() > deadline {
                bail!("`tether dashboard` not listening on {address} after {within:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
