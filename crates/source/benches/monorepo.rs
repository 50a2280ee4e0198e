//! Monorepo benchmark: prints medians.
//!
//! A repository of 1,000 application directories (10 objects each) served
//! by `git daemon` on 127.0.0.1. Measures:
//! 1. after a commit that changes one app, the time until all 1,000 apps'
//!    desired state is current, with and without the render cache, and how
//!    many renders ran;
//! 2. an unchanged check (ls-refs only, no object transfer);
//! 3. a full fetch into an empty store vs `git clone --bare` of the same URL.
//!
//! Run: `cargo bench -p tether-source --bench monorepo` (APPS=… to resize).

use std::time::{Duration, Instant};

use tether_source::{Repositories, Source};
use tether_testkit::{GitDaemon, Repo, git};

const OBJECTS_PER_APP: usize = 10;
const ROUNDS: usize = 5;

fn main() {
    let apps: usize = std::env::var("APPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let temp = tempfile::tempdir().unwrap();
    println!("monorepo benchmark: {apps} apps x {OBJECTS_PER_APP} objects");

    // Make the monorepo and serve it.
    let repo = Repo::new();
    for app in 0..apps {
        write_app(&repo, app, 0);
    }
    repo.commit_all("apps");
    let daemon = GitDaemon::start(&repo.publish("mono"));
    let url = daemon.url("mono");
    let sources: Vec<Source> = (0..apps)
        .map(|app| Source {
            repo_url: url.clone(),
            path: format!("apps/app-{app:04}"),
            ..Default::default()
        })
        .collect();

    // Warm both pipelines: stores fetched, cache filled.
    let cached = Repositories::new(temp.path().join("cache-a"));
    let uncached = Repositories::new(temp.path().join("cache-b")).without_render_cache();
    // Brings every app current: one fetch of the repository, then every
    // app's desired state. Returns (fetch, render-all) times.
    let sync_all = |repositories: &Repositories| -> (Duration, Duration) {
        let started = Instant::now();
        let update = repositories.update(&url, None).unwrap();
        let fetched = started.elapsed();
        let started = Instant::now();
        for source in &sources {
            repositories
                .render(source, &update, &Default::default())
                .unwrap();
        }
        (fetched, started.elapsed())
    };
    sync_all(&cached);
    sync_all(&uncached);
    // `git fetch` of the same commits into a bare clone, for comparison.
    let mirror = temp.path().join("mirror.git");
    git(
        temp.path(),
        &["clone", "-q", "--bare", &url, mirror.to_str().unwrap()],
    );
    let mut git_fetches = Vec::new();

    // 1. One app changes; bring all apps current.
    let (mut with_cache, mut without_cache, mut renders) = (Vec::new(), Vec::new(), Vec::new());
    let (mut cached_renders, mut uncached_renders, mut fetches) =
        (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        write_app(&repo, round * 7 % apps, round);
        repo.commit_all("change one app");
        repo.publish("mono");
        git_fetches.push(time(|| {
            git(
                &mirror,
                &["fetch", "-q", &url, "+refs/heads/*:refs/heads/*"],
            )
        }));
        let before = cached.renders();
        let (fetch, render) = sync_all(&cached);
        renders.push(cached.renders() - before);
        fetches.push(fetch);
        cached_renders.push(render);
        with_cache.push(fetch + render);
        let (fetch, render) = sync_all(&uncached);
        fetches.push(fetch);
        uncached_renders.push(render);
        without_cache.push(fetch + render);
    }
    let (cached_ms, uncached_ms) = (median_ms(&mut with_cache), median_ms(&mut without_cache));
    let (cached_render_ms, uncached_render_ms) = (
        median_ms(&mut cached_renders),
        median_ms(&mut uncached_renders),
    );
    println!("after a one-app commit, all {apps} apps current:");
    println!(
        "  fetch of the commit (both):       {:9.2} ms (git fetch of it: {:.2} ms)",
        median_ms(&mut fetches),
        median_ms(&mut git_fetches)
    );
    println!(
        "  desired state of all apps, cache:    {cached_render_ms:9.2} ms (renders per round: {renders:?})"
    );
    println!("  desired state of all apps, no cache: {uncached_render_ms:9.2} ms");
    println!(
        "  speed-up of bringing apps current:   {:9.1}x",
        uncached_render_ms / cached_render_ms
    );
    println!(
        "  end to end incl. fetch: {cached_ms:.2} ms vs {uncached_ms:.2} ms ({:.1}x)",
        uncached_ms / cached_ms
    );

    // 2. Nothing changed.
    let (mut unchanged, requests_before) = (Vec::new(), daemon.upload_pack_requests());
    for _ in 0..20 {
        let started = Instant::now();
        let update = cached.update(&url, None).unwrap();
        unchanged.push(started.elapsed());
        assert!(!update.fetched, "an unchanged remote transfers no objects");
    }
    let connections = daemon.upload_pack_requests() - requests_before;
    println!(
        "unchanged check (handshake + ls-refs, no pack): {:.2} ms, {:.1} upload-pack connections per check",
        median_ms(&mut unchanged),
        connections as f64 / unchanged.len() as f64
    );

    // 3. Full fetch vs git clone.
    let (mut ours, mut clone) = (Vec::new(), Vec::new());
    for round in 0..3 {
        let store = temp.path().join(format!("fresh-{round}"));
        ours.push(time(|| {
            Repositories::new(store.clone()).update(&url, None).unwrap();
        }));
        let target = temp.path().join(format!("clone-{round}.git"));
        clone.push(time(|| {
            git(
                temp.path(),
                &["clone", "-q", "--bare", &url, target.to_str().unwrap()],
            )
        }));
    }
    let (ours_ms, clone_ms) = (median_ms(&mut ours), median_ms(&mut clone));
    println!(
        "full fetch from git daemon: tether {ours_ms:.1} ms, git clone --bare {clone_ms:.1} ms, ratio {:.2}",
        ours_ms / clone_ms
    );
}

fn write_app(repo: &Repo, app: usize, generation: usize) {
    let mut text = String::new();
    for object in 0..OBJECTS_PER_APP {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{object}\n  namespace: app-{app}\ndata:\n  generation: \"{generation}\"\n"
        ));
    }
    repo.write(&format!("apps/app-{app:04}/objects.yaml"), &text);
}

fn time<T>(f: impl FnOnce() -> T) -> Duration {
    let started = Instant::now();
    f();
    started.elapsed()
}

fn median_ms(samples: &mut [Duration]) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1000.0
}
