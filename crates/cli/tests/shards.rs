//! Three real `tether run --shards 3` processes against one control plane
//! (started here, with an audit log), each as its own user: each holds one
//! shard Lease, the thirty apps converge and say which replica reconciles
//! them (`status.controller`); SIGKILL one and the other two heal its apps
//! within 20 s; start it again and it takes one shard back; stop another
//! with SIGTERM and its shard is taken at once. The API
//! server's audit log shows that no app's objects were ever written by
//! two replicas in turn and back (A…A B…B, never A B A).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use support::{
    Running, app_dir, audited_plane, converged, hijack_until_healed, many_apps_repo,
    tether_command_as, tether_ok,
};
use tether_controller::api::Application;
use tether_core::shard::{lease_name, shard_of};
use tether_testkit::{ControlPlane, TestNamespace, application, client_for, eventually};

const APPS: usize = 30;
const SHARDS: u32 = 3;
const REPLICAS: [&str; 3] = ["tether-a", "tether-b", "tether-c"];
/// The acceptance bound: a killed replica's apps are reconciled by the
/// others within this.
const TAKEOVER_LIMIT: Duration = Duration::from_secs(20);

/// Namespace `name` on `plane`, as its administrator.
async fn namespace(plane: &ControlPlane, name: &str) -> TestNamespace {
    let kubeconfig = plane.kubeconfig().to_path_buf();
    let client = client_for(&kubeconfig).await;
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    TestNamespace {
        name: name.into(),
        client,
        kubeconfig,
    }
}

/// `tether run --shards 3` as replica (and user) `identity`, logging to
/// `identity.log` beside the audit log.
fn replica(ns: &TestNamespace, kubeconfig: &Path, identity: &str, logs: &Path) -> Running {
    let cache = ns.cache_dir().join(identity);
    let shards = SHARDS.to_string();
    let mut command = tether_command_as(
        kubeconfig,
        &[
            "run",
            "--lease-namespace",
            &ns.name,
            "--watch-namespace",
            &ns.name,
            "--identity",
            identity,
            "--resync-seconds",
            "60",
            "--cache-dir",
            cache.to_str().unwrap(),
            "--shards",
            &shards,
        ],
    );
    let log = std::fs::File::create(logs.join(format!("{identity}.log"))).unwrap();
    command
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .env("TETHER_LOG", "info,tether_controller::shards=debug");
    Running {
        child: command.spawn().expect("tether run starts"),
        leftovers: vec![cache],
    }
}

/// A shard other than `shard`.
fn moved_away(shard: u32) -> u32 {
    (shard + 1) % SHARDS
}

fn app_name(i: usize) -> String {
    format!("app-{i}")
}

/// The replica whose user wrote each write of each app's ConfigMap, in
/// the order the API server received them (dry runs left out); writes by
/// `restarted` (a replica, and when it started again) after that moment
/// are its second run's, named `<replica>'`.
fn writers(
    audit_log: &Path,
    namespace: &str,
    (replica, restarted): (&str, Timestamp),
) -> BTreeMap<String, Vec<(Timestamp, String)>> {
    let text = std::fs::read_to_string(audit_log).unwrap_or_default();
    let mut writes: BTreeMap<String, Vec<(Timestamp, String)>> = BTreeMap::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let object = &event["objectRef"];
        let user = event["user"]["username"].as_str().unwrap_or_default();
        let writes_something = ["create", "update", "patch", "delete"]
            .contains(&event["verb"].as_str().unwrap_or_default());
        let dry_run = event["requestURI"]
            .as_str()
            .is_some_and(|uri| uri.contains("dryRun"));
        if event["stage"] != "ResponseComplete"
            || !REPLICAS.contains(&user)
            || !writes_something
            || dry_run
            || object["resource"] != "configmaps"
            || object["namespace"] != namespace
            || event["responseStatus"]["code"].as_i64().unwrap_or(500) >= 300
        {
            continue;
        }
        let Some(app) = object["name"]
            .as_str()
            .and_then(|n| n.strip_prefix("settings-"))
        else {
            continue;
        };
        let at: Timestamp = event["requestReceivedTimestamp"]
            .as_str()
            .unwrap_or_default()
            .parse()
            .unwrap();
        let writer = match user == replica && at > restarted {
            true => format!("{user}'"),
            false => user.to_string(),
        };
        writes
            .entry(format!("app-{app}"))
            .or_default()
            .push((at, writer));
    }
    for list in writes.values_mut() {
        list.sort();
    }
    writes
}

/// The writers of one app in turn, each once per run of writes: `[a, b]`
/// for a a b b, `[a, b, a]` for a b a.
fn turns(writes: &[(Timestamp, String)]) -> Vec<String> {
    let mut turns: Vec<String> = Vec::new();
    for (_, writer) in writes {
        if turns.last() != Some(writer) {
            turns.push(writer.clone());
        }
    }
    turns
}

async fn holders(leases: &Api<Lease>) -> BTreeMap<u32, String> {
    let mut holders = BTreeMap::new();
    for shard in 0..SHARDS {
        let holder = leases
            .get_opt(&lease_name(shard))
            .await
            .ok()
            .flatten()
            .and_then(|lease| lease.spec?.holder_identity)
            .filter(|holder| !holder.is_empty());
        if let Some(holder) = holder {
            holders.insert(shard, holder);
        }
    }
    holders
}

/// The holder of each shard once every shard is held and `check` holds
/// of the holders.
async fn all_held(
    leases: &Api<Lease>,
    what: &str,
    check: impl Fn(&BTreeMap<u32, String>) -> bool,
) -> BTreeMap<u32, String> {
    eventually(what, || async {
        let holders = holders(leases).await;
        (holders.len() == SHARDS as usize && check(&holders)).then_some(holders)
    })
    .await
}

/// Waits until the replicas other than `gone` hold every shard, then
/// until each app of `which` is reconciled by its shard's new holder;
/// returns the new holders and how long after `since` each wait ended.
async fn taken_over(
    leases: &Api<Lease>,
    apps: &Api<Application>,
    namespace: &str,
    gone: &str,
    which: &[usize],
    since: Instant,
) -> (BTreeMap<u32, String>, Duration, Duration) {
    let others = format!("others than {gone}");
    let holders = all_held(
        leases,
        &format!("{others} holding every shard"),
        |holders| !holders.values().any(|h| h == gone),
    )
    .await;
    let held = since.elapsed();
    let what = format!("{gone}'s apps reconciled by {others}");
    converged_by_holders(&what, apps, namespace, which, &holders).await;
    (holders, held, since.elapsed())
}

/// Whether each replica holds a shard of its own.
fn one_each(holders: &BTreeMap<u32, String>) -> bool {
    holders.values().collect::<BTreeSet<_>>().len() == REPLICAS.len()
}

/// Waits until each app of `which` is converged, reconciled by the
/// holder of its shard in `holders` (`status.controller`).
async fn converged_by_holders(
    what: &str,
    apps: &Api<Application>,
    namespace: &str,
    which: &[usize],
    holders: &BTreeMap<u32, String>,
) {
    eventually(what, || async {
        for &i in which {
            let status = apps.get(&app_name(i)).await.ok()?.status?;
            let holder = &holders[&shard_of(namespace, &app_name(i), SHARDS)];
            if !converged(&status) || status.controller? != *holder {
                return None;
            }
        }
        Some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn three_sharded_replicas_split_the_apps_and_take_over_a_killed_ones_without_two_writers() {
    let (plane, audit_log) = audited_plane("shards");
    let ns = namespace(&plane, "shards").await;
    tether_ok(&ns, &["install", "--namespace", &ns.name]);
    // Three replicas, each as its own user (the audit log tells them apart).
    let mut running: BTreeMap<&str, Running> = BTreeMap::new();
    for identity in REPLICAS {
        let kubeconfig = plane.user_kubeconfig(identity, &["system:masters"]);
        let logs = audit_log.parent().unwrap();
        running.insert(identity, replica(&ns, &kubeconfig, identity, logs));
    }
    let started = Instant::now();

    // Each holds one shard Lease.
    let leases: Api<Lease> = ns.api();
    let held = all_held(&leases, "each replica holding one shard", one_each).await;
    println!(
        "shards held after {:.1} s: {held:?}",
        started.elapsed().as_secs_f64()
    );
    // The apps come once the shards are split, so each app's objects are
    // first written by its shard's holder: a replica that started sooner
    // may hold two shards for a moment (on a busy machine, long enough to
    // sync their apps), and the writers' turns below start from this split.
    let repo = many_apps_repo(APPS);
    for i in 0..APPS {
        application(&app_name(i), &ns.name, &repo.url(), &app_dir(i))
            .apply(&ns.client)
            .await;
    }

    // Every app converges, reconciled by the holder of its shard.
    let apps: Api<Application> = ns.api();
    let owner = |i: usize, holders: &BTreeMap<u32, String>| {
        holders[&shard_of(&ns.name, &app_name(i), SHARDS)].clone()
    };
    let all: Vec<usize> = (0..APPS).collect();
    converged_by_holders(
        "all thirty apps converged, each by its shard's holder",
        &apps,
        &ns.name,
        &all,
        &held,
    )
    .await;
    println!(
        "all converged after {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // SIGKILL the holder of app-0's shard, and change one of its apps
    // behind Git's back: the others heal it.
    let victim = owner(0, &held);
    let victims: Vec<usize> = (0..APPS).filter(|i| owner(*i, &held) == victim).collect();
    running.get_mut(victim.as_str()).unwrap().kill();
    let killed = Instant::now();
    let drifted = victims[victims.len() / 2];
    let config_maps: Api<ConfigMap> = ns.api();
    let name = format!("settings-{drifted}");
    hijack_until_healed(&config_maps, &name, " by a survivor").await;
    let healed = killed.elapsed();
    let (after, taken, reconciled) =
        taken_over(&leases, &apps, &ns.name, &victim, &victims, killed).await;
    println!(
        "SIGKILL {victim} ({} apps): drift on {name} healed after {:.1} s, all shards held again after {:.1} s ({after:?}), its apps all reconciled by others after {:.1} s",
        victims.len(),
        healed.as_secs_f64(),
        taken.as_secs_f64(),
        reconciled.as_secs_f64()
    );
    assert!(healed < TAKEOVER_LIMIT, "healed after {healed:?}");
    assert!(
        reconciled < TAKEOVER_LIMIT,
        "reconciled by others after {reconciled:?}"
    );

    // Start it again: it takes one shard back from the replica holding
    // two, which stops writing for it before giving its Lease back.
    let restarted = Timestamp::now();
    let rejoined = Instant::now();
    let kubeconfig = plane.user_kubeconfig(&victim, &["system:masters"]);
    let logs = audit_log.parent().unwrap();
    running.insert(
        REPLICAS.iter().find(|r| **r == victim).unwrap(),
        replica(&ns, &kubeconfig, &victim, logs),
    );
    let balanced = all_held(&leases, "each replica holding one shard again", one_each).await;
    let moved: Vec<u32> = (0..SHARDS).filter(|s| balanced[s] != after[s]).collect();
    assert_eq!(moved.len(), 1, "{after:?} → {balanced:?}");
    converged_by_holders(
        "every app converged, by its shard's new holder",
        &apps,
        &ns.name,
        &all,
        &balanced,
    )
    .await;
    println!(
        "{victim} restarted: shard {moved:?} moved to it, its apps reconciled by it after {:.1} s ({balanced:?})",
        rejoined.elapsed().as_secs_f64()
    );
    // It heals what drifts in the shard it took.
    let taken_back = (0..APPS)
        .find(|i| shard_of(&ns.name, &app_name(*i), SHARDS) == moved[0])
        .unwrap();
    let name = format!("settings-{taken_back}");
    hijack_until_healed(&config_maps, &name, " by the restarted replica").await;

    // SIGTERM another (a deleted pod): it gives its shard back as it
    // exits, and the others take it at once, not after the Lease expires.
    let stopping = balanced[&moved_away(moved[0])].clone();
    let pid = running[stopping.as_str()].child.id().to_string();
    let terminated = Instant::now();
    tether_testkit::run_ok(std::process::Command::new("kill").args(["-TERM", &pid]));
    let (last_two, handed_over, reconciled) =
        taken_over(&leases, &apps, &ns.name, &stopping, &all, terminated).await;
    let exited = running
        .get_mut(stopping.as_str())
        .unwrap()
        .child
        .wait()
        .unwrap();
    assert!(exited.success(), "{exited:?}");
    println!(
        "SIGTERM {stopping}: its shard taken by another after {:.1} s, its apps reconciled after {:.1} s ({last_two:?})",
        handed_over.as_secs_f64(),
        reconciled.as_secs_f64()
    );
    assert!(
        handed_over < Duration::from_secs(5),
        "after {handed_over:?}"
    );

    // The audit log: no app's objects written by a replica, then
    // another, then the first again (a restarted replica is another).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes = writers(&audit_log, &ns.name, (&victim, restarted));
    let mut wrote: BTreeSet<String> = BTreeSet::new();
    for (app, list) in &writes {
        let turns = turns(list);
        let distinct: BTreeSet<&String> = turns.iter().collect();
        assert_eq!(
            distinct.len(),
            turns.len(),
            "{app}'s objects were written by {turns:?} in turn"
        );
        wrote.extend(turns);
    }
    assert_eq!(writes.len(), APPS, "writes seen for {:?}", writes.keys());
    let drifted_turns = turns(&writes[&app_name(drifted)]);
    assert_eq!(drifted_turns.first(), Some(&victim), "{drifted_turns:?}");
    assert_ne!(drifted_turns.last(), Some(&victim), "{drifted_turns:?}");
    assert_eq!(wrote.len(), REPLICAS.len() + 1, "writers: {wrote:?}");
    let last = turns(&writes[&app_name(taken_back)]);
    assert_eq!(last.last(), Some(&format!("{victim}'")), "{last:?}");
    drop(running);
    // The logs and audit log stay only when the test fails.
    drop(plane);
    let _ = std::fs::remove_dir_all(audit_log.parent().unwrap());
}
