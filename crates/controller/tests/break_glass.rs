//! Break-glass windows end to end, against a real kube-apiserver with real
//! `kubectl` and a real Git repository: a window keeps an emergency change
//! and records it, the rest of the app keeps healing, expiry resumes
//! self-heal, the records outlive a controller restart, and bad requests
//! change nothing.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::break_glass::{open_in_force, wait_for_events, window_where};
use support::{Repo, config_for, create_app, start_controller, status_where, web};
use tether_controller::api::BreakGlass;
use tether_controller::api::break_glass::Resolution;
use tether_controller::break_glass::audit;
use tether_controller::break_glass::request::{self, Opening, RequestError};
use tether_core::audit::ChainState;
use tether_core::window::DEFAULT_MAX_TTL;
use tether_testkit::{TestNamespace, eventually};

fn with_api(replicas: u32) -> Vec<(&'static str, String)> {
    let mut files = web(replicas, "hello");
    files.push((
        "app/api.yaml",
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: api}}\n  template:\n    metadata:\n      labels: {{app: api}}\n    spec:\n      containers:\n        - name: api\n          image: nginx:1.27\n"
        ),
    ));
    files
}

async fn synced(ns: &TestNamespace, repo: &Repo) -> Api<tether_controller::api::Application> {
    let apps = create_app(ns, repo).await;
    status_where(&apps, "Synced", |s| {
        s.sync.status == "Synced" && !s.inventory.is_empty()
    })
    .await;
    apps
}

/// A namespace with a running controller and app `shop` Synced from a new
/// repository holding `files`.
async fn synced_app(prefix: &str, files: &[(&str, String)]) -> (TestNamespace, Repo) {
    let ns = TestNamespace::create(prefix).await;
    let repo = Repo::new();
    repo.commit(files, "the app");
    start_controller(&ns).await;
    synced(&ns, &repo).await;
    (ns, repo)
}

fn opening(ns: &TestNamespace, resources: &[&str], ttl: Duration) -> Opening {
    Opening {
        reason: "INC-1234: checkout returns 500s".into(),
        ..support::break_glass::opening(ns, resources, ttl)
    }
}

#[tokio::test]
async fn a_window_on_one_deployment_keeps_its_change_and_the_rest_of_the_app_heals() {
    let (ns, _repo) = synced_app("bg-scope", &with_api(2)).await;

    let window = open_in_force(
        &ns,
        opening(&ns, &["Deployment/web"], Duration::from_secs(600)),
    )
    .await;
    assert!(!window.spec.opened_by.username.is_empty());
    let name = window.name_any();

    ns.kubectl_ok(&["set", "image", "deployment/web", "web=nginx:1.27-hotfix"]);
    ns.kubectl_ok(&["scale", "deployment/api", "--replicas=5"]);

    // The scale outside the window is Manual drift and reverted.
    eventually("deployment/api reverted to 2 replicas", || async {
        (ns.jsonpath("deployment/api", "{.spec.replicas}") == "2").then_some(())
    })
    .await;
    // The change inside is Emergency drift: recorded, with writer and diff.
    let window = window_where(&ns, &name, "the emergency change recorded", |w| {
        w.status.as_ref().is_some_and(|s| s.record_count >= 1)
    })
    .await;
    let status = window.status.unwrap();
    let record = &status.records[0];
    assert_eq!(
        record.object.to_string(),
        format!("Deployment {}/web", ns.name)
    );
    let field = &record.fields[0];
    assert_eq!(field.path, "spec.template.spec.containers[name=web].image");
    assert_eq!(field.desired, Some(json!("nginx:1.27")));
    assert_eq!(field.live, Some(json!("nginx:1.27-hotfix")));
    assert_eq!(field.writer.as_ref().unwrap().manager, "kubectl-set");
    // Its full record is in the audit log, in the controller's namespace,
    // chained; the controller checked it with its key.
    let window = api_get(&ns, &name).await;
    let log = audit::check(&ns.client, &ns.name, &window, None)
        .await
        .unwrap();
    assert_eq!(log.report.state, ChainState::Intact, "{:?}", log.report);
    assert_eq!(log.records.len(), 1);
    assert_eq!(log.records[0]["kind"], "Emergency");
    assert_eq!(log.records[0]["reason"], "INC-1234: checkout returns 500s");
    let window = window_where(&ns, &name, "the controller's verdict", |w| {
        w.status
            .as_ref()
            .and_then(|s| s.audit_chain.as_ref())
            .is_some_and(|c| c.state == "Intact" && c.records == 1)
    })
    .await;
    let verdict = window.status.unwrap().audit_chain.unwrap();
    assert_eq!(
        verdict.message,
        "1 record(s), chain intact, every seal verified"
    );

    // And it stays: several resyncs later the hotfix image is still live.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        ns.jsonpath(
            "deployment/web",
            "{.spec.template.spec.containers[0].image}"
        ),
        "nginx:1.27-hotfix"
    );
    let apps = Api::<tether_controller::api::Application>::namespaced(ns.client.clone(), &ns.name);
    let status = apps.get("shop").await.unwrap().status.unwrap();
    assert!(
        status
            .drift
            .iter()
            .any(|d| d.record.kind.as_str() == "Emergency" && d.response == "Reported"),
        "{:?}",
        status.drift
    );
    // The same change is recorded once, not once per reconcile.
    assert_eq!(api_get(&ns, &name).await.status.unwrap().record_count, 1);
    // A second change to the same object records that change alone: the
    // image, still drifted next to it, is not listed again.
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=4"]);
    let window = window_where(&ns, &name, "the second change recorded", |w| {
        w.status.as_ref().is_some_and(|s| s.record_count >= 2)
    })
    .await;
    let records = window.status.unwrap().records;
    let paths: Vec<&str> = records[1].fields.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["spec.replicas"], "{records:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(api_get(&ns, &name).await.status.unwrap().record_count, 2);

    // Closing with revert resumes self-heal for the scope.
    request::close(&ns.client, &api_get(&ns, &name).await, Resolution::Revert)
        .await
        .unwrap();
    eventually("deployment/web reverted after closing", || async {
        (ns.jsonpath(
            "deployment/web",
            "{.spec.template.spec.containers[0].image}",
        ) == "nginx:1.27")
            .then_some(())
    })
    .await;
    window_where(&ns, &name, "the window Closed", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.phase.is_some_and(|phase| phase == "Closed"))
    })
    .await;
    wait_for_events(&ns, &name, &["BreakGlassOpened", "BreakGlassClosed"]).await;
}

async fn api_get(ns: &TestNamespace, name: &str) -> BreakGlass {
    Api::<BreakGlass>::namespaced(ns.client.clone(), &ns.name)
        .get(name)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_expired_window_is_marked_expired_and_self_heal_reverts_its_change() {
    let (ns, _repo) = synced_app("bg-expiry", &web(2, "hello")).await;

    let window = open_in_force(&ns, opening(&ns, &[], Duration::from_secs(12))).await;
    let name = window.name_any();
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=4"]);
    window_where(&ns, &name, "the scale recorded", |w| {
        w.status.as_ref().is_some_and(|s| s.record_count >= 1)
    })
    .await;
    assert_eq!(ns.jsonpath("deployment/web", "{.spec.replicas}"), "4");

    let window = window_where(&ns, &name, "the window Expired", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.phase.is_some_and(|phase| phase == "Expired"))
    })
    .await;
    let condition = &window.status.unwrap().conditions[0];
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.status.as_str(),
            condition.reason.as_str()
        ),
        ("Open", "False", "Expired")
    );
    eventually("deployment/web reverted after expiry", || async {
        (ns.jsonpath("deployment/web", "{.spec.replicas}") == "2").then_some(())
    })
    .await;
    wait_for_events(
        &ns,
        &name,
        &[
            "BreakGlassOpened",
            "BreakGlassExpiring",
            "BreakGlassExpired",
        ],
    )
    .await;
    // An expired window can be neither extended nor closed.
    let error = request::extend(
        &ns.client,
        &api_get(&ns, &name).await,
        Duration::from_secs(60),
        DEFAULT_MAX_TTL,
        "more",
    )
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("is Expired: only an open window can be extended"),
        "{error}"
    );
}

#[tokio::test]
async fn a_window_its_records_and_its_audit_log_survive_a_controller_restart() {
    let ns = TestNamespace::create("bg-restart").await;
    let repo = Repo::new();
    repo.commit(&web(2, "hello"), "web");
    tether_controller::install::install(ns.client.clone(), &ns.name)
        .await
        .unwrap();
    let config = config_for(&ns);
    let first = tokio::spawn(tether_controller::run(ns.client.clone(), config.clone()));
    synced(&ns, &repo).await;

    let name = open_in_force(&ns, opening(&ns, &[], Duration::from_secs(600)))
        .await
        .name_any();
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=3"]);
    window_where(&ns, &name, "the first change recorded", |w| {
        w.status.as_ref().is_some_and(|s| s.record_count == 1)
    })
    .await;

    first.abort();
    let _ = first.await;
    // A new process has a new identity: it takes over once the old lease lapses.
    let config = tether_controller::Config {
        identity: format!("{}-restarted", config.identity),
        ..config
    };
    let second = tokio::spawn(tether_controller::run(ns.client.clone(), config));

    ns.kubectl_ok(&[
        "patch",
        "configmap/settings",
        "-p",
        r#"{"data":{"greeting":"maintenance"}}"#,
    ]);
    let window = window_where(&ns, &name, "the second change recorded", |w| {
        w.status.as_ref().is_some_and(|s| s.record_count == 2)
    })
    .await;
    // Nothing was recorded twice and nothing was reverted across the restart.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let window = api_get(&ns, &window.name_any()).await;
    assert_eq!(
        window.status.as_ref().unwrap().record_count,
        2,
        "{}",
        serde_json::to_string_pretty(&window.status).unwrap()
    );
    assert_eq!(ns.jsonpath("deployment/web", "{.spec.replicas}"), "3");
    assert_eq!(
        ns.jsonpath("configmap/settings", "{.data.greeting}"),
        "maintenance"
    );
    let log = audit::check(&ns.client, &ns.name, &window, None)
        .await
        .unwrap();
    assert_eq!(log.report.state, ChainState::Intact, "{:?}", log.report);
    assert_eq!(log.records.len(), 2);
    assert_eq!(log.records[1]["object"]["kind"], "ConfigMap");
    // Audit records are immutable: the API server refuses to change one.
    let configmaps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let record = &window.status.unwrap().records[0].audit;
    let refused = configmaps
        .patch(
            record,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"record.json": "{}"}})),
        )
        .await;
    assert!(refused.is_err(), "an audit record was changed");
    second.abort();
}

#[tokio::test]
async fn bad_break_glass_requests_are_refused_and_change_nothing() {
    let (ns, _repo) = synced_app("bg-bad", &web(2, "hello")).await;

    // A window for an unknown app.
    let mut unknown = opening(&ns, &[], Duration::from_secs(60));
    unknown.app = "nope".into();
    let error = request::open(&ns.client, unknown).await.unwrap_err();
    assert!(matches!(error, RequestError::UnknownApp { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains(&format!("Application {}/nope not found", ns.name))
    );
    // A resource the app does not have.
    let error = request::open(
        &ns.client,
        opening(&ns, &["Deployment/ghost"], Duration::from_secs(60)),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "--resource Deployment/ghost: Application shop has applied no such object"
    );
    // No reason.
    let mut silent = opening(&ns, &[], Duration::from_secs(60));
    silent.reason = " ".into();
    assert!(matches!(
        request::open(&ns.client, silent).await.unwrap_err(),
        RequestError::NoReason
    ));
    assert!(ns.list::<BreakGlass>().await.is_empty());

    // A window written by hand in someone else's name is refused by the
    // API server (the admission policy), with its message.
    let forged = json!({"apiVersion": "tether.dev/v1alpha1", "kind": "BreakGlass",
        "metadata": {"name": "forged"},
        "spec": {"application": "shop", "reason": "INC-1: forged",
                 "openedBy": {"username": "someone-else"},
                 "expiresAt": "2099-01-01T00:00:00Z"}});
    let refused = eventually("the admission policy to be in force", || async {
        let output = ns.kubectl_with_stdin(&["create", "-f", "-"], &forged.to_string());
        (!output.status.success()).then(|| String::from_utf8_lossy(&output.stderr).to_string())
    })
    .await;
    assert!(
        refused.contains("spec.openedBy.username must be the requesting user"),
        "{refused}"
    );

    // A malformed window (written in the requester's own name) is Invalid
    // and suspends nothing.
    let me = request::whoami(&ns.client).await.unwrap().username;
    let malformed = json!({"apiVersion": "tether.dev/v1alpha1", "kind": "BreakGlass",
        "metadata": {"name": "malformed"},
        "spec": {"application": "shop", "reason": "INC-2: typo",
                 "openedBy": {"username": me},
                 "expiresAt": "next tuesday"}});
    ns.kubectl_ok_with_stdin(&["create", "-f", "-"], &malformed.to_string());
    let window = window_where(&ns, "malformed", "the window Invalid", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.phase.is_some_and(|phase| phase == "Invalid"))
    })
    .await;
    assert!(
        window.status.unwrap().conditions[0]
            .message
            .contains("spec.expiresAt: \"next tuesday\" is not an RFC 3339 time")
    );
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=5"]);
    eventually(
        "the scale reverted despite the malformed window",
        || async { (ns.jsonpath("deployment/web", "{.spec.replicas}") == "2").then_some(()) },
    )
    .await;

    // A silent extension (moving expiresAt by hand) is refused.
    let open = request::open(&ns.client, opening(&ns, &[], Duration::from_secs(600)))
        .await
        .unwrap();
    let output = ns.kubectl(&[
        "patch",
        "breakglass",
        &open.name_any(),
        "--type=merge",
        "-p",
        r#"{"spec":{"expiresAt":"2099-01-01T00:00:00Z"}}"#,
    ]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("extend with tether break-glass extend"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The audited extension passes and names its author.
    let extended = request::extend(
        &ns.client,
        &open,
        Duration::from_secs(1200),
        DEFAULT_MAX_TTL,
        "INC-1234 still open",
    )
    .await
    .unwrap();
    assert_eq!(extended.spec.extensions.len(), 1);
    assert_eq!(extended.spec.extensions[0].by, me);
}

#[tokio::test]
async fn adopting_a_windows_changes_commits_exactly_those_fields_and_the_app_syncs_without_a_revert()
 {
    let ns = TestNamespace::create("bg-adopt").await;
    let repo = Repo::new();
    let mut files = web(2, "hello");
    // Comments must survive the edit.
    files[1].1 = files[1].1.replacen(
        "\nspec:\n",
        "\n# the storefront\nspec:\n  # scaled by Git, not by hand\n",
        1,
    );
    repo.commit(&files, "web with comments");
    repo.git(&["config", "receive.denyCurrentBranch", "updateInstead"]);
    let before = repo.git(&["rev-parse", "HEAD"]);
    start_controller(&ns).await;
    let apps = synced(&ns, &repo).await;

    let name = open_in_force(&ns, opening(&ns, &[], Duration::from_secs(600)))
        .await
        .name_any();
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=5"]);
    ns.kubectl_ok(&[
        "patch",
        "configmap/settings",
        "-p",
        r#"{"data":{"greeting":"degraded mode"}}"#,
    ]);
    let window = window_where(&ns, &name, "both changes recorded", |w| {
        w.status.as_ref().is_some_and(|s| s.record_count >= 2)
    })
    .await;

    // Watch for a revert from here on.
    let reverted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (reverted, kubeconfig, namespace) =
            (reverted.clone(), ns.kubeconfig.clone(), ns.name.clone());
        std::thread::spawn(move || {
            for _ in 0..300 {
                let output = std::process::Command::new("kubectl")
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args([
                        "-n",
                        &namespace,
                        "get",
                        "deployment/web",
                        "configmap/settings",
                        "-o",
                        "jsonpath={.items[0].spec.replicas} {.items[1].data.greeting}",
                    ])
                    .output()
                    .unwrap();
                let seen = String::from_utf8_lossy(&output.stdout).to_string();
                if output.status.success() && seen != "5 degraded mode" {
                    reverted.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    let app = apps.get("shop").await.unwrap();
    let records = tether_controller::adopt::records_of_window(&window);
    let options = tether_controller::adopt::AdoptOptions {
        author: "Ada Lovelace <ada@example.com>".parse().unwrap(),
        branch: None,
        credentials: None,
        sandbox: Default::default(),
    };
    let adopted = tether_controller::adopt::adopt_records(
        ns.client.clone(),
        &app,
        &records,
        &tether_controller::adopt::window_reason(&window),
        &options,
    )
    .await
    .unwrap();
    // One commit whose diff is exactly the two fields, comments kept.
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), adopted.commit);
    assert_eq!(repo.git(&["rev-parse", "HEAD~1"]), before);
    let diff = repo.git(&["diff", "-U0", "HEAD~1", "HEAD"]);
    let changed: Vec<&str> = diff
        .lines()
        .filter(|l| {
            (l.starts_with('+') || l.starts_with('-'))
                && !l.starts_with("+++")
                && !l.starts_with("---")
        })
        .collect();
    assert_eq!(
        changed,
        [
            "-  greeting: \"hello\"",
            "+  greeting: \"degraded mode\"",
            "-  replicas: 2",
            "+  replicas: 5",
        ],
        "{diff}"
    );
    let web_yaml = std::fs::read_to_string(repo.dir.join("app/web.yaml")).unwrap();
    assert!(
        web_yaml.contains("# the storefront\n")
            && web_yaml.contains("# scaled by Git, not by hand\n")
    );
    let message = repo.git(&["log", "-1", "--format=%an%n%B"]);
    assert!(message.starts_with("Ada Lovelace\n"), "{message}");
    assert!(
        message.contains("INC-1234: checkout returns 500s"),
        "{message}"
    );
    assert!(message.contains("spec.replicas"), "{message}");

    // Close as adopted: the app fetches the commit and is Synced to it,
    // with the live values unchanged.
    request::close(&ns.client, &api_get(&ns, &name).await, Resolution::Adopt)
        .await
        .unwrap();
    status_where(&apps, "Synced to the adopted commit", |s| {
        s.sync.status == "Synced" && s.sync.revision.as_deref() == Some(adopted.commit.as_str())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    watcher.join().unwrap();
    assert!(
        !reverted.load(std::sync::atomic::Ordering::SeqCst),
        "a revert happened in between"
    );
    assert_eq!(ns.jsonpath("deployment/web", "{.spec.replicas}"), "5");
}

#[tokio::test]
async fn adopting_with_nothing_recorded_is_refused_and_writes_nothing() {
    let ns = TestNamespace::create("bg-adopt-none").await;
    let repo = Repo::new();
    repo.commit(&web(2, "hello"), "web");
    let before = repo.git(&["rev-parse", "HEAD"]);
    start_controller(&ns).await;
    let apps = synced(&ns, &repo).await;
    let app = apps.get("shop").await.unwrap();
    let error = tether_controller::adopt::records_to_adopt(&app, false).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("{}/shop: no drift to adopt", ns.name)
    );
    let window = request::open(&ns.client, opening(&ns, &[], Duration::from_secs(600)))
        .await
        .unwrap();
    assert!(tether_controller::adopt::records_of_window(&window).is_empty());
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), before);
}
