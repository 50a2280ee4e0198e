//! The huge and explosive inputs, generated rather than stored, with their
//! time and memory measured: a billion-laughs document, a 50 MB file, 100k
//! objects, and Git trees too large to read (small forms here; the 1 GB
//! repository and the commit of 100k files are `#[ignore]`d, run them with
//! `cargo test -p tether-source --test bad_input -- --ignored`).

use std::time::{Duration, Instant};

use serde_json::json;
use tether_source::files::{Entry, Files};
use tether_source::git::Update;
use tether_source::render::Limits;
use tether_source::{Repositories, Sandbox, Source};
use tether_testkit::{Repo, assert_contains};

use crate::run::{Outcome, render_snapshot};

const MIB: usize = 1024 * 1024;

/// Resident memory now and at its peak since the last [`reset_peak`], in bytes.
fn memory() -> (usize, usize) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse::<usize>().ok())
            .unwrap_or(0)
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Starts a new peak-memory window (Linux: `5` into `clear_refs`). The
/// peak is the process's, so measured tests hold [`MEASURING`] to run one
/// at a time.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Held for the whole of a measured test, its input's generation included.
fn measuring() -> std::sync::MutexGuard<'static, ()> {
    MEASURING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Renders `files` as a plain directory and returns the error, how long it
/// took, and how much the peak memory rose above where it started.
fn refused(files: &[(&str, Vec<u8>)]) -> (String, Duration, usize) {
    let mut snapshot = Files::default();
    for (path, bytes) in files {
        snapshot
            .entries
            .insert(path.to_string(), Entry::File(bytes.clone()));
    }
    reset_peak();
    let (before, _) = memory();
    let started = Instant::now();
    let outcome = render_snapshot(
        &snapshot,
        &serde_json::json!({"directory": {}}),
        "",
        &crate::run::sandbox(),
    );
    let took = started.elapsed();
    let (_, peak) = memory();
    match outcome {
        Outcome::Refused(error) => (error, took, peak.saturating_sub(before)),
        Outcome::Accepted(what) => panic!("accepted: {what}"),
    }
}

/// The classic billion laughs: nine levels of ten aliases each, 10^9
/// strings once expanded.
fn billion_laughs() -> String {
    let mut text =
        String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lol}\nl0: &l0 \"lol\"\n");
    for level in 1..=9 {
        let refs = vec![format!("*l{}", level - 1); 10].join(", ");
        text.push_str(&format!("l{level}: &l{level} [{refs}]\n"));
    }
    text.push_str("data: *l9\n");
    text
}

#[test]
fn a_billion_laughs_document_is_refused_at_once_within_100_mb() {
    let _measuring = measuring();
    let (error, took, grew) = refused(&[("bomb.yaml", billion_laughs().into_bytes())]);
    assert!(
        error.starts_with("bomb.yaml:") && error.contains("YAML aliases expand to more than"),
        "{error}"
    );
    // About 0.1 s here when the machine is idle; the bound only tells a
    // refusal from an expansion (which takes minutes) on a loaded machine.
    println!("billion laughs refused in {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(grew < 100 * MIB, "memory grew by {} MiB", grew / MIB);
}

#[test]
fn a_50_mb_file_is_refused_before_it_is_parsed() {
    let _measuring = measuring();
    let mut text =
        String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  blob: ");
    text.push_str(&"x".repeat(50 * MIB));
    text.push('\n');
    let (error, took, grew) = refused(&[("big/cm.yaml", text.into_bytes())]);
    assert!(
        error.starts_with(
            "big/cm.yaml: is 50.0 MiB, more than the limit of 16 MiB for one file (not parsed)"
        ),
        "{error}"
    );
    // Milliseconds when idle; the bound is for a loaded machine.
    println!("50 MB file refused in {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(grew < 100 * MIB, "memory grew by {} MiB", grew / MIB);
}

fn config_maps(count: usize) -> String {
    (0..count)
        .map(|i| format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n"))
        .collect::<Vec<_>>()
        .join("---\n")
}

#[test]
fn a_file_of_100k_objects_is_refused_at_the_object_limit() {
    let _measuring = measuring();
    let (error, took, grew) = refused(&[("many.yaml", config_maps(100_000).into_bytes())]);
    assert!(
        error.starts_with("many.yaml:")
            && error.contains("the source renders more than 10000 objects"),
        "{error}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(grew < 200 * MIB, "memory grew by {} MiB", grew / MIB);
}

#[test]
fn a_list_of_100k_items_is_refused_at_the_object_limit() {
    let _measuring = measuring();
    let items: Vec<String> = (0..100_000)
        .map(|i| format!("{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"c{i}\"}}}}"))
        .collect();
    let text = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{}]}}",
        items.join(",")
    );
    let (error, _, grew) = refused(&[("list.json", text.into_bytes())]);
    assert!(
        error.starts_with("list.json:1: the source renders more than 10000 objects"),
        "{error}"
    );
    assert!(grew < 200 * MIB, "memory grew by {} MiB", grew / MIB);
}

/// A controller's view of `repo` with `limits`: its repositories, fetched
/// (so that what follows measures the render alone), and the source of the
/// application at `path`.
struct Fetched {
    repositories: Repositories,
    update: Update,
    source: Source,
    _cache: tempfile::TempDir,
}

fn fetch(repo: &Repo, path: &str, limits: Limits) -> Fetched {
    let cache = tempfile::tempdir().unwrap();
    let repositories = Repositories::new(cache.path().into()).with_sandbox(Sandbox {
        limits,
        ..crate::run::sandbox()
    });
    let url = repo.url();
    let update = repositories.update(&url, None).unwrap();
    let source = Source {
        repo_url: url,
        path: path.into(),
        ..Source::default()
    };
    Fetched {
        repositories,
        update,
        source,
        _cache: cache,
    }
}

impl Fetched {
    /// Renders the application as the controller does for a Git source.
    fn render(&self) -> Result<usize, String> {
        self.repositories
            .render(&self.source, &self.update, &Default::default())
            .map(|rendered| rendered.manifests.len())
            .map_err(|e| e.to_string())
    }
}

fn render_repo(repo: &Repo, path: &str, limits: Limits) -> Result<usize, String> {
    fetch(repo, path, limits).render()
}

#[test]
fn a_tree_with_more_files_than_the_limit_is_refused_without_reading_them() {
    let repo = Repo::new();
    for i in 0..300 {
        repo.write(&format!("app/f{i}.txt"), "x");
    }
    repo.commit_all("many files");
    let limits = Limits {
        max_tree_files: 200,
        ..Limits::default()
    };
    let error = render_repo(&repo, "app", limits).unwrap_err();
    assert_contains(&error, "300 files, more than the limit of 200 per source");
}

#[test]
fn a_tree_larger_than_the_limit_is_refused_from_the_object_headers() {
    let repo = Repo::new();
    repo.write(
        "app/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    );
    repo.write("app/blob.bin", &"0".repeat(2 * MIB));
    repo.commit_all("a big blob");
    let limits = Limits {
        max_tree_bytes: MIB,
        ..Limits::default()
    };
    let error = render_repo(&repo, "app", limits).unwrap_err();
    assert_contains(
        &error,
        "its files are more than the limit of 1 MiB per source (at ",
    );
}

#[test]
#[ignore = "writes a 1 GB repository; run with --ignored"]
fn a_one_gigabyte_repository_is_refused_with_bounded_memory() {
    let _measuring = measuring();
    let repo = Repo::new();
    repo.write(
        "app/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    );
    let chunk = "0".repeat(256 * MIB);
    for i in 0..4 {
        repo.write(&format!("app/blob{i}.bin"), &chunk);
    }
    drop(chunk);
    repo.commit_all("1 GB");
    // Fetching holds one object at a time in memory (gix), so a 256 MB
    // blob costs 256 MB there; reading the tree must cost nothing like it.
    let fetched = fetch(&repo, "app", Limits::default());
    reset_peak();
    let (before, _) = memory();
    let error = fetched.render().unwrap_err();
    let (_, peak) = memory();
    assert_contains(
        &error,
        "its files are more than the limit of 512 MiB per source",
    );
    let grew = peak.saturating_sub(before);
    assert!(grew < 100 * MIB, "memory grew by {} MiB", grew / MIB);
}

#[test]
#[ignore = "commits 100k files; run with --ignored"]
fn a_commit_of_100k_manifests_is_refused_at_the_object_limit() {
    let _measuring = measuring();
    let repo = Repo::new();
    for i in 0..100_000 {
        repo.write(
            &format!("app/{}/cm-{i}.yaml", i % 100),
            &format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm-{i}}}\n"),
        );
    }
    repo.commit_all("100k files");
    let fetched = fetch(&repo, "app", Limits::default());
    reset_peak();
    let (before, _) = memory();
    let started = Instant::now();
    let error = fetched.render().unwrap_err();
    let (_, peak) = memory();
    assert_contains(&error, "the source renders more than 10000 objects");
    let grew = peak.saturating_sub(before);
    assert!(grew < 500 * MIB, "memory grew by {} MiB", grew / MIB);
    eprintln!(
        "100k files refused in {:?}, peak +{} MiB",
        started.elapsed(),
        grew / MIB
    );
}

#[test]
fn a_submodule_in_the_applications_tree_is_refused_naming_it() {
    let repo = Repo::new();
    repo.write(
        "app/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    );
    repo.write(
        "other/cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
    );
    let first = repo.commit_all("plain files");
    // A gitlink, as `git submodule add` records one, without its files.
    for path in ["app/lib", "other/lib"] {
        repo.git(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{first},{path}"),
        ]);
    }
    repo.git(&["commit", "-q", "-m", "submodules"]);
    for renderer in [json!({"directory": {}}), json!({"kustomize": {}})] {
        let mut fetched = fetch(&repo, "app", Limits::default());
        fetched.source.renderer = serde_json::from_value(renderer).unwrap();
        let error = fetched.render().unwrap_err();
        assert_contains(
            &error,
            &format!(
                "app/lib is a Git submodule (commit {first}); Tether does not fetch submodules"
            ),
        );
    }
    // A submodule elsewhere in the repository is not the application's.
    let other = fetch(&repo, "other", Limits::default())
        .render()
        .unwrap_err();
    assert_contains(&other, "other/lib is a Git submodule");
}
