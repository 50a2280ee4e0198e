//! The fault scenarios that run `tether run` as a process of its own:
//! killed mid-sync ([`crash`]), or with its cache on a file system that
//! fills up or turns read-only ([`disk`]).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::Api;
use tether_controller::api::Application;
use tether_controller::install;
use tether_core::{ConditionStatus, SyncStatus};

use super::{Outcome, files};
use crate::{Repo, TestNamespace, application, status_where};

/// `kill -9` of `tether` (the binary at `tether`, run as `tether run`) at
/// `kills` points of a 200-object sync, each followed by a new commit; the
/// controller started again must bring every object to that commit, leave
/// no operation at Running and record the sync. Each kill comes at a
/// point spread over the sync once it is under way; where the operation
/// was left Running, the objects still at the old commit must be reverted
/// as Accidental drift and said so in an Event (`said_and_held`).
/// `to_converge` is the slowest convergence after a kill; `objects_lost`
/// counts objects left at an older commit.
pub async fn crash(tether: &std::path::Path, kills: u64) -> Outcome {
    let (ns, repo, apps) = own_app("faults-crash", &config_maps("r0")).await;
    let cache = ns.cache_dir().join("crash");
    let start = || {
        spawn(
            std::process::Command::new(tether).args(run_args(&ns, "crash", &cache)),
            &ns,
        )
    };
    let mut controller = start();
    let head = repo.head();
    status_where(&apps, "Synced at the first commit", move |s| {
        s.sync.status == SyncStatus::Synced && s.sync.revision.as_deref() == Some(head.as_str())
    })
    .await;
    let mut outcome = Outcome::new("kill -9 during a sync");
    let (mut interrupted, mut reported_accidental) = (0, 0);
    for kill in 1..=kills {
        let revision = format!("r{kill}");
        repo.commit(&config_maps(&revision), &revision);
        let head = repo.head();
        let pause = Duration::from_millis((kill * 7919 + 311) % 400);
        let interrupted_sync = kill_during_sync(&mut controller, &apps, &head, pause).await;
        let killed = Instant::now();
        let killed_at = k8s_openapi::jiff::Timestamp::now();
        controller = start();
        let expected = head.clone();
        let synced = tokio::time::timeout(
            crate::PATIENCE,
            status_where(&apps, "Synced after the kill", move |s| {
                s.sync.status == SyncStatus::Synced
                    && s.sync.revision.as_deref() == Some(expected.as_str())
            }),
        )
        .await;
        let Ok(status) = synced else {
            outcome.converged = false;
            break;
        };
        outcome.to_converge = outcome.to_converge.max(killed.elapsed());
        let stuck = status
            .operation_state
            .as_ref()
            .is_none_or(|op| op.phase == tether_core::OperationPhase::Running);
        let recorded = status.history.iter().any(|h| h.revision == head);
        outcome.records_lost += usize::from(stuck || !recorded);
        if interrupted_sync {
            interrupted += 1;
            // The objects the killed sync left at the old commit were
            // reverted as Accidental drift, and said so in an Event.
            reported_accidental += usize::from(reverted_accidental_drift(&ns, killed_at).await);
        }
        outcome.objects_lost += config_maps_behind(&ns, &revision).await;
    }
    let _ = controller.kill();
    let _ = controller.wait();
    let _ = std::fs::remove_dir_all(&cache);
    outcome.said_and_held = reported_accidental == interrupted;
    outcome.note = format!(
        "{kills} kills, {interrupted} of them mid-sync, {reported_accidental} of those reported as Accidental drift; the slowest convergence after a kill is the time shown"
    );
    outcome
}

/// Once the sync toward `head` is under way (or, if it was too quick to be
/// seen, done), `pause`, then `kill -9` the controller; whether it was
/// killed mid-sync, that is with the operation toward `head` at Running.
async fn kill_during_sync(
    controller: &mut std::process::Child,
    apps: &Api<Application>,
    head: &str,
    pause: Duration,
) -> bool {
    let expected = head.to_string();
    let _ = tokio::time::timeout(
        Duration::from_secs(20),
        status_where(apps, "the sync under way", move |s| {
            s.operation_state
                .as_ref()
                .is_some_and(|op| op.revision == expected)
        }),
    )
    .await;
    tokio::time::sleep(pause).await;
    let _ = controller.kill();
    let _ = controller.wait();
    apps.get("shop")
        .await
        .ok()
        .and_then(|app| app.status?.operation_state)
        .is_some_and(|op| op.phase == tether_core::OperationPhase::Running && op.revision == head)
}

/// The crash scenario's 200 ConfigMaps `cm-000`…`cm-199`, each holding
/// `revision`, as files under `app/`.
fn config_maps(revision: &str) -> Vec<(String, String)> {
    (0..200)
        .map(|n| {
            (
                format!("app/cm-{n:03}.yaml"),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{n:03}\ndata:\n  revision: \"{revision}\"\n"
                ),
            )
        })
        .collect()
}

/// Whether a `DriftReverted` Event about Accidental drift was recorded in
/// `ns` at `since` or later.
async fn reverted_accidental_drift(
    ns: &TestNamespace,
    since: k8s_openapi::jiff::Timestamp,
) -> bool {
    let events: Vec<Event> = ns.list().await;
    events.iter().any(|event| {
        event.reason.as_deref() == Some("DriftReverted")
            && event
                .note
                .as_deref()
                .is_some_and(|n| n.contains("(Accidental)"))
            && match &event.series {
                Some(series) => series.last_observed_time.0 >= since,
                None => event.event_time.as_ref().is_some_and(|t| t.0 >= since),
            }
    })
}

/// How many of the scenario's ConfigMaps in `ns` do not hold `revision`.
async fn config_maps_behind(ns: &TestNamespace, revision: &str) -> usize {
    let configmaps: Vec<ConfigMap> = ns.list().await;
    configmaps
        .iter()
        .filter(|cm| {
            cm.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("cm-"))
        })
        .filter(|cm| {
            cm.data
                .as_ref()
                .and_then(|d| d.get("revision"))
                .is_none_or(|r| r != revision)
        })
        .count()
}

/// A new namespace with Tether installed and app `shop` for a new
/// repository holding `files`, polled every second; for scenarios that run
/// `tether run` as a process of its own.
async fn own_app(
    prefix: &str,
    files: &[(impl AsRef<str>, impl AsRef<str>)],
) -> (TestNamespace, Repo, Api<Application>) {
    let ns = TestNamespace::create(prefix).await;
    install::install(ns.client.clone(), &ns.name)
        .await
        .expect("installed");
    let repo = Repo::new();
    repo.commit(files, "one");
    let apps = application("shop", &ns.name, &repo.url(), "app")
        .interval("1s")
        .apply(&ns.client)
        .await;
    (ns, repo, apps)
}

/// The arguments of `tether run` for `ns` as replica `identity` with its
/// cache in `cache`.
fn run_args(
    ns: &TestNamespace,
    identity: &str,
    cache: &std::path::Path,
) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = ["run", "--lease-namespace", &ns.name]
        .into_iter()
        .chain(["--watch-namespace", &ns.name, "--identity", identity])
        .chain(["--resync-seconds", "30", "--cache-dir"])
        .map(Into::into)
        .collect();
    args.push(cache.into());
    args
}

/// Starts `command` with `ns`'s kubeconfig, its output dropped.
fn spawn(command: &mut std::process::Command, ns: &TestNamespace) -> std::process::Child {
    command
        .env("TETHER_KUBECONFIG", &ns.kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("tether run starts")
}

/// What goes wrong with the controller's cache directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskTrouble {
    /// The file system is full.
    Full,
    /// The file system turned read-only.
    ReadOnly,
}

/// `tether run` (the binary at `tether`) with its cache directory on a
/// 64 MiB tmpfs of its own mount namespace; once the app is synced the
/// file system fills up (or turns read-only) and a commit arrives. Tether
/// must keep the last good state and say why in a condition naming the
/// problem; once the file system is writable again it must sync the commit
/// from a cache that `git fsck` finds sound. `said_and_held` covers the
/// condition and the kept state; `objects_lost` counts Git's objects not
/// in the cluster at the end and a cache `git fsck` refuses.
pub async fn disk(tether: &std::path::Path, trouble: DiskTrouble) -> Outcome {
    let (ns, repo, apps) = own_app("faults-disk", &files("one")).await;
    let cache = ns.cache_dir().join("disk");
    std::fs::create_dir_all(&cache).expect("cache directory");
    let mut controller = spawn(
        std::process::Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"mount -t tmpfs -o size=64m tmpfs "$0" && exec "$@""#)
            .arg(&cache)
            .arg(tether)
            .args(run_args(&ns, "disk", &cache)),
        &ns,
    );
    // A shell in the controller's mount namespace, with the cache as $0.
    let pid = controller.id().to_string();
    let inside = |script: &str| {
        crate::run_ok(
            std::process::Command::new("nsenter")
                .args(["--target", &pid, "--mount", "sh", "-c", script])
                .arg(&cache),
        )
    };
    let synced = |what: &'static str| {
        let head = repo.head();
        status_where(&apps, what, move |s| {
            s.sync.status == SyncStatus::Synced && s.sync.revision.as_deref() == Some(head.as_str())
        })
    };
    synced("Synced at the first commit").await;
    let before = repo.head();
    let (trouble_script, heal_script, saying, scenario) = match trouble {
        DiskTrouble::Full => (
            r#"dd if=/dev/zero of="$0/filler" bs=64k 2>/dev/null; true"#,
            r#"rm -f "$0/filler""#,
            "No space left on device",
            "cache file system full",
        ),
        DiskTrouble::ReadOnly => (
            r#"mount -o remount,ro "$0""#,
            r#"mount -o remount,rw "$0""#,
            "Read-only file system",
            "cache file system read-only",
        ),
    };
    inside(trouble_script);
    let start = Instant::now();
    repo.commit(&files("two"), "two");
    let said = tokio::time::timeout(
        crate::PATIENCE,
        status_where(&apps, "the cache trouble reported", move |s| {
            s.conditions
                .iter()
                .any(|c| c.status == ConditionStatus::False && c.message.contains(saying))
        }),
    )
    .await;
    let held = said
        .as_ref()
        .is_ok_and(|status| status.sync.revision.as_deref() == Some(before.as_str()));
    let message = said
        .as_ref()
        .ok()
        .and_then(|s| s.conditions.iter().find(|c| c.message.contains(saying)))
        .map(|c| c.message.clone())
        .unwrap_or_default();
    inside(heal_script);
    let end = Instant::now();
    let converged = tokio::time::timeout(crate::PATIENCE, synced("Synced after the cache healed"))
        .await
        .is_ok();
    let to_converge = end.elapsed();
    // Every Git store in the cache is sound.
    let sound = std::process::Command::new("nsenter")
        .args(["--target", &pid, "--mount", "sh", "-c"])
        .arg(
            r#"find "$0" -name objects -type d -prune | while read -r objects; do git --git-dir "$(dirname "$objects")" fsck --no-progress >/dev/null 2>&1 || echo "$objects"; done"#,
        )
        .arg(&cache)
        .output()
        .expect("nsenter runs");
    let unsound = String::from_utf8_lossy(&sound.stdout).trim().to_string();
    let _ = controller.kill();
    let _ = controller.wait();
    let settings = ns
        .get_opt::<ConfigMap>("settings")
        .await
        .and_then(|cm| cm.data)
        .and_then(|data| data.get("greeting").cloned());
    Outcome {
        converged,
        to_converge,
        objects_lost: usize::from(settings.as_deref() != Some("two"))
            + usize::from(!unsound.is_empty()),
        said_and_held: held,
        note: format!(
            "said after {:?}: {message}; unsound stores: {}",
            start.elapsed().min(end - start),
            if unsound.is_empty() { "none" } else { &unsound }
        ),
        ..Outcome::new(scenario)
    }
}
