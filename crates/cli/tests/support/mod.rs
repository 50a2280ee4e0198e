//! Shared by the CLI's end-to-end tests: the real `tether` binary, a real
//! Git repository (file://), and processes that never outlive a test.
//!
//! Each test binary compiles this module on its own and uses only part of
//! it, so unused items are expected here.
#![allow(dead_code)]

pub mod dashboard;
pub mod metrics;
pub mod tenancy;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tether_controller::api::ApplicationStatus;
use tether_core::{HealthStatus, SyncStatus};
use tether_testkit::{ControlPlane, Launch, TestNamespace, application, eventually, run_ok};

pub use tether_testkit::Repo;

/// `tether ARGS` against the test's control plane.
pub fn tether_command(ns: &TestNamespace, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tether"));
    command.args(args).env("TETHER_KUBECONFIG", &ns.kubeconfig);
    command
}

/// Runs `tether ARGS` off the async runtime (the command blocks).
pub async fn tether_blocking(ns: &TestNamespace, args: &[&str]) -> Output {
    let mut command = tether_command(ns, args);
    tokio::task::spawn_blocking(move || command.output().expect("tether runs"))
        .await
        .unwrap()
}

/// `tether ARGS` as the user of `kubeconfig`, found through
/// `$KUBECONFIG` as in that user's shell.
pub fn tether_command_as(kubeconfig: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tether"));
    command
        .args(args)
        .env_remove("TETHER_KUBECONFIG")
        .env("KUBECONFIG", kubeconfig);
    command
}

/// Runs `tether ARGS` to the end as the user of `kubeconfig`.
pub fn tether_as(kubeconfig: &Path, args: &[&str]) -> Output {
    tether_command_as(kubeconfig, args)
        .output()
        .expect("tether runs")
}

/// Runs `tether ARGS` to the end.
pub fn tether(ns: &TestNamespace, args: &[&str]) -> Output {
    tether_command(ns, args).output().expect("tether runs")
}

/// Runs `tether ARGS`, which must succeed (else the test fails with its
/// stderr); returns its stdout.
pub fn tether_ok(ns: &TestNamespace, args: &[&str]) -> String {
    run_ok(&mut tether_command(ns, args))
}

/// Panics, showing `text`, unless each of `expected` is a whole line of it.
pub fn assert_lines<S: AsRef<str>>(text: &str, expected: &[S]) {
    for expected in expected {
        let expected = expected.as_ref();
        assert!(
            text.lines().any(|line| line == expected),
            "no {expected:?} in:\n{text}"
        );
    }
}

/// Stdout and stderr, as one text.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Stdout and stderr of a `tether` that must have failed with exit code 2.
pub fn error_text(output: &Output) -> String {
    let said = text(output);
    assert_eq!(output.status.code(), Some(2), "{said}");
    said
}

/// A child process killed (SIGKILL) and reaped when dropped, so a failing
/// test leaves nothing running; its `leftovers` are removed then too.
pub struct Running {
    pub child: Child,
    pub leftovers: Vec<PathBuf>,
}

impl Running {
    pub fn spawn(mut command: Command) -> Running {
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the process starts");
        Running {
            child,
            leftovers: Vec::new(),
        }
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
        for path in &self.leftovers {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// `tether run` for `ns` only, as replica `identity`, resyncing every 2 s;
/// stopped (and its Git cache removed) when the returned process is dropped.
pub fn run_controller(ns: &TestNamespace, identity: &str) -> Running {
    run_controller_resyncing(ns, identity, 2)
}

/// `run_controller`, resyncing every `seconds`.
pub fn run_controller_resyncing(ns: &TestNamespace, identity: &str, seconds: u32) -> Running {
    run_controller_for(ns, ns, identity, seconds)
}

/// `tether run` with its Lease and audit records in `home` (where `tether
/// install` went), for `watched` only, as replica `identity`, resyncing
/// every `seconds`; stopped (and its Git cache removed) when dropped.
pub fn run_controller_for(
    home: &TestNamespace,
    watched: &TestNamespace,
    identity: &str,
    seconds: u32,
) -> Running {
    run_controller_with(home, watched, identity, seconds, &[])
}

/// `run_controller_for` with `more` arguments to `tether run`.
pub fn run_controller_with(
    home: &TestNamespace,
    watched: &TestNamespace,
    identity: &str,
    seconds: u32,
    more: &[&str],
) -> Running {
    let (command, cache) = controller_command(home, watched, identity, seconds, more);
    let mut running = Running::spawn(command);
    running.leftovers.push(cache);
    running
}

/// The `tether run` command of `run_controller_with`, and the Git cache
/// directory it uses (under `watched`'s cache directory), for a test that
/// starts it its own way.
pub fn controller_command(
    home: &TestNamespace,
    watched: &TestNamespace,
    identity: &str,
    seconds: u32,
    more: &[&str],
) -> (Command, PathBuf) {
    let seconds = seconds.to_string();
    let cache = watched.cache_dir().join(identity);
    let mut args = vec![
        "run",
        "--lease-namespace",
        &home.name,
        "--watch-namespace",
        &watched.name,
        "--identity",
        identity,
        "--resync-seconds",
        &seconds,
        "--cache-dir",
        cache.to_str().unwrap(),
    ];
    args.extend_from_slice(more);
    (tether_command(home, &args), cache)
}

/// A new namespace named after `prefix`, with Tether installed in it.
pub async fn installed(prefix: &str) -> TestNamespace {
    let ns = TestNamespace::create(prefix).await;
    tether_ok(&ns, &["install", "--namespace", &ns.name]);
    ns
}

/// A repository whose `app/` holds ConfigMap `settings` greeting "hello".
pub fn settings_repo() -> Repo {
    settings_repo_greeting("hello").0
}

/// A repository whose `app/` holds ConfigMap `settings` greeting
/// `greeting` (the commit's subject too), and that commit.
pub fn settings_repo_greeting(greeting: &str) -> (Repo, String) {
    let repo = Repo::new();
    let commit = repo.commit(
        &[("app/settings.yaml", config_map("settings", greeting))],
        greeting,
    );
    (repo, commit)
}

/// A repository of `count` apps: directory `apps/app-I` (see [`app_dir`])
/// holding ConfigMap `settings-I` greeting "hello", for I from 0.
pub fn many_apps_repo(count: usize) -> Repo {
    let repo = Repo::new();
    let files: Vec<(String, String)> = (0..count)
        .map(|i| {
            (
                format!("{}/settings.yaml", app_dir(i)),
                config_map(&format!("settings-{i}"), "hello"),
            )
        })
        .collect();
    repo.commit(&files, &format!("{count} apps"));
    repo
}

/// The directory of app `i` in [`many_apps_repo`].
pub fn app_dir(i: usize) -> String {
    format!("apps/app-{i}")
}

/// [`settings_repo`] taking pushes to its checked-out branch, as adopting
/// a change into Git pushes.
pub fn pushable_settings_repo() -> Repo {
    let repo = settings_repo();
    repo.git(&["config", "receive.denyCurrentBranch", "updateInstead"]);
    repo
}

/// Binds ServiceAccount `account` (`NAMESPACE:NAME`) to ClusterRole
/// `role` with a `kind` (`rolebinding`, within `ns`, or
/// `clusterrolebinding`) named `binding`.
pub fn bind_cluster_role(ns: &TestNamespace, kind: &str, binding: &str, role: &str, account: &str) {
    ns.kubectl_ok(&[
        "create",
        kind,
        binding,
        "--clusterrole",
        role,
        "--serviceaccount",
        account,
    ]);
}

/// A ConfigMap `name` with `greeting`, as YAML.
pub fn config_map(name: &str, greeting: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  greeting: \"{greeting}\"\n"
    )
}

/// Whether an app is Synced and Healthy.
pub fn converged(status: &ApplicationStatus) -> bool {
    status.sync.status == SyncStatus::Synced && status.health.status == HealthStatus::Healthy
}

/// A control plane of the test's own, in a fresh folder
/// `tether-test-NAME-PID` under the temporary directory, writing the API
/// server's audit log; returns it and the log's path.
pub fn audited_plane(name: &str) -> (ControlPlane, PathBuf) {
    let dir = std::env::temp_dir().join(format!("tether-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let audit_log = dir.join("audit.log");
    let plane = ControlPlane::start(
        &dir.join("plane"),
        &Launch {
            audit_log: Some(audit_log.clone()),
            ..Launch::default()
        },
    );
    (plane, audit_log)
}

/// Changes ConfigMap `name`'s greeting ("hello") behind Git's back, and
/// waits until it says "hello" again (`healed`: by whom, for the wait's
/// message).
pub async fn hijack_until_healed(config_maps: &Api<ConfigMap>, name: &str, healed: &str) {
    let patch = json!({"data": {"greeting": "hijacked"}});
    config_maps
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually(&format!("{name} healed{healed}"), || async {
        let live = config_maps.get(name).await.ok()?;
        (live.data?.get("greeting")? == "hello").then_some(())
    })
    .await;
}

/// Runs `tether app create shop` in `ns` for `repo`'s `app/` directory,
/// deploying to `ns`, as an operator would; returns its stdout.
pub fn app_create_shop(ns: &TestNamespace, repo: &Repo) -> String {
    let url = repo.url();
    let n = ns.name.as_str();
    tether_ok(
        ns,
        &[
            "app",
            "create",
            "shop",
            "-n",
            n,
            "--repo",
            &url,
            "--path",
            "app",
            "--dest-namespace",
            n,
        ],
    )
}

/// Creates Application `shop` in `ns` for `repo`'s `app/` directory with
/// `kubectl apply`, as an operator would.
pub fn create_app(ns: &TestNamespace, repo: &Repo, sync_policy: Value) {
    let app = application("shop", &ns.name, &repo.url(), "app").sync_policy(sync_policy);
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &app.manifest().to_string());
}
