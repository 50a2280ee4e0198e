//! `tether sync APP` driven like an operator would, against the real local
//! control plane and a real `tether run`: `--dry-run` changes nothing and
//! says what would change; `--revision` syncs an older commit once, follows
//! the sync with progress lines and records the revision.

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;
use support::{
    Repo, config_map, create_app, installed, run_controller, settings_repo, settings_repo_greeting,
    tether, tether_blocking, tether_ok, text,
};
use tether_controller::api::Application;

async fn version(config_maps: &Api<ConfigMap>, name: &str) -> String {
    config_maps
        .get(name)
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

#[tokio::test]
async fn sync_dry_run_prints_each_change_and_applies_nothing() {
    let ns = installed("cli-dry-run").await;

    // Live: `same` as Git has it, `settings` with an older greeting.
    let live = std::env::temp_dir().join(format!("tether-cli-dry-run-{}", ns.name));
    std::fs::create_dir_all(&live).unwrap();
    std::fs::write(live.join("same.yaml"), config_map("same", "hello")).unwrap();
    std::fs::write(live.join("settings.yaml"), config_map("settings", "old")).unwrap();
    let path = live.to_str().unwrap();
    tether_ok(
        &ns,
        &["sync", "--path", path, "-n", &ns.name, "--app", "shop"],
    );
    let _ = std::fs::remove_dir_all(&live);

    // Git: the same `same`, a new greeting in `settings`, and a Deployment.
    let repo = Repo::new();
    let web = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n";
    let commit = repo.commit(
        &[
            ("app/same.yaml", config_map("same", "hello")),
            ("app/settings.yaml", config_map("settings", "new")),
            ("app/web.yaml", web.to_string()),
        ],
        "three objects",
    );
    create_app(&ns, &repo, json!({"automated": false}));

    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let before = (
        version(&config_maps, "same").await,
        version(&config_maps, "settings").await,
    );
    let dry_run = tether(&ns, &["sync", "shop", "-n", &ns.name, "--dry-run"]);
    let shown = text(&dry_run);
    assert!(dry_run.status.success(), "{shown}");
    for line in [
        format!("dry run of {}/shop at {commit}", ns.name),
        format!("ConfigMap {}/same unchanged (dry run)", ns.name),
        format!("ConfigMap {}/settings configured (dry run)", ns.name),
        format!("Deployment {}/web created (dry run)", ns.name),
        "dry run: 1 created, 1 configured, 1 unchanged; nothing applied".to_string(),
    ] {
        assert!(shown.lines().any(|l| l == line), "no {line:?} in:\n{shown}");
    }

    // Nothing changed.
    let after = (
        version(&config_maps, "same").await,
        version(&config_maps, "settings").await,
    );
    assert_eq!(before, after);
    let deployments: Api<Deployment> = Api::namespaced(ns.client.clone(), &ns.name);
    assert!(deployments.get_opt("web").await.unwrap().is_none());
    let app = Api::<Application>::namespaced(ns.client.clone(), &ns.name)
        .get("shop")
        .await
        .unwrap();
    assert!(app.status.is_none_or(|s| s.history.is_empty()));
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_to_an_older_revision_follows_the_sync_and_records_the_revision() {
    let ns = installed("cli-revision").await;
    let _controller = run_controller(&ns, "only");

    // Wave 0 a Deployment the fake kubelet makes ready, available only 3 s
    // later; wave 1 a ConfigMap.
    let repo = Repo::new();
    let web = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  annotations:\n    tether.dev/sync-wave: \"0\"\nspec:\n  replicas: 1\n  minReadySeconds: 3\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n";
    let wave_one = |greeting: &str| {
        config_map("settings", greeting).replace(
            "  name: settings\n",
            "  name: settings\n  annotations:\n    tether.dev/sync-wave: \"1\"\n",
        )
    };
    let older = repo.commit(
        &[
            ("app/web.yaml", web.to_string()),
            ("app/settings.yaml", wave_one("one")),
        ],
        "one",
    );
    let newer = repo.commit(&[("app/settings.yaml", wave_one("two"))], "two");
    create_app(
        &ns,
        &repo,
        json!({"automated": false, "waitForWaves": true}),
    );

    let args = [
        "sync",
        "shop",
        "-n",
        &ns.name,
        "--revision",
        &older,
        "--timeout",
        "120",
    ];
    let synced = tether_blocking(&ns, &args).await;
    let shown = text(&synced);
    assert!(synced.status.success(), "{shown}");
    assert!(
        shown.contains(&format!("synced {}/shop to {older}: 2 created", ns.name)),
        "{shown}"
    );
    // The sync waited for wave 0 to be healthy, so it ran long enough to
    // show its progress.
    assert!(shown.contains("applied 1/2 objects (wave 0)"), "{shown}");

    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let greeting = |cm: ConfigMap| cm.data.unwrap()["greeting"].clone();
    assert_eq!(greeting(config_maps.get("settings").await.unwrap()), "one");
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &ns.name);
    let status = apps.get("shop").await.unwrap().status.unwrap();
    assert_eq!(status.sync.revision.as_deref(), Some(older.as_str()));
    assert_eq!(status.operation_state.unwrap().revision, older);
    assert_eq!(status.history[0].revision, older);
    assert_eq!(status.history[0].initiator, tether_core::Initiator::User);

    // Without --revision, the next sync goes to the source's revision.
    let synced = tether_blocking(&ns, &["sync", "shop", "-n", &ns.name, "--timeout", "120"]).await;
    let shown = text(&synced);
    assert!(synced.status.success(), "{shown}");
    let status = apps.get("shop").await.unwrap().status.unwrap();
    assert_eq!(
        greeting(config_maps.get("settings").await.unwrap()),
        "two",
        "tether sync said: {shown}; operation: {:?}",
        status.operation_state
    );
    assert_eq!(status.sync.revision.as_deref(), Some(newer.as_str()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sync_whose_render_fails_says_why_at_once_and_exits_non_zero() {
    let ns = installed("cli-sync-fails").await;
    let _controller = run_controller(&ns, "only");
    let repo = Repo::new();
    repo.commit(
        &[(
            "app/broken.yaml",
            "kind: ConfigMap\n  bad: [indent\n".to_string(),
        )],
        "a broken manifest",
    );
    create_app(&ns, &repo, json!({"automated": false}));

    let started = std::time::Instant::now();
    let sync = tether(&ns, &["sync", "shop", "-n", &ns.name, "--timeout", "60"]);
    let waited = started.elapsed();
    let shown = text(&sync);
    println!("{shown}failed sync reported after {waited:?}");
    assert_eq!(sync.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains(&format!("sync of {}/shop failed: RenderFailed: ", ns.name))
            && shown.contains("broken.yaml:"),
        "{shown}"
    );
    assert!(waited < std::time::Duration::from_secs(30), "{waited:?}");
}

#[tokio::test]
async fn a_one_off_revision_on_an_automated_app_is_refused_with_what_to_do() {
    let ns = installed("cli-sync-pin").await;
    let (repo, older) = settings_repo_greeting("one");
    repo.commit(
        &[("app/settings.yaml", config_map("settings", "two"))],
        "two",
    );
    create_app(&ns, &repo, json!({}));

    let sync = tether(&ns, &["sync", "shop", "-n", &ns.name, "--revision", &older]);
    let shown = text(&sync);
    assert_eq!(sync.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains("syncs automatically") && shown.contains("automated: false"),
        "{shown}"
    );
    // Nothing was requested.
    let app = Api::<Application>::namespaced(ns.client.clone(), &ns.name)
        .get("shop")
        .await
        .unwrap();
    assert!(
        !app.metadata
            .annotations
            .unwrap_or_default()
            .contains_key(tether_controller::api::application::SYNC_REQUEST_ANNOTATION)
    );
}

#[tokio::test]
async fn a_dry_run_into_a_missing_namespace_fails_as_the_sync_would() {
    let ns = installed("cli-dry-nowhere").await;
    let repo = settings_repo();
    let nowhere = format!("{}-nowhere", ns.name);
    let app = |sync_policy: serde_json::Value| {
        tether_testkit::application("shop", &ns.name, &repo.url(), "app")
            .destination(&nowhere)
            .sync_policy(sync_policy)
    };
    app(json!({"automated": false})).apply(&ns.client).await;

    let dry_run = tether(&ns, &["sync", "shop", "-n", &ns.name, "--dry-run"]);
    let shown = text(&dry_run);
    assert_eq!(dry_run.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains(&format!("ConfigMap {nowhere}/settings"))
            && shown.contains(&format!("namespaces \"{nowhere}\" not found")),
        "{shown}"
    );

    // With createNamespace the sync would make it first: all clear.
    app(json!({"automated": false, "createNamespace": true}))
        .apply(&ns.client)
        .await;
    let dry_run = tether(&ns, &["sync", "shop", "-n", &ns.name, "--dry-run"]);
    let shown = text(&dry_run);
    assert!(dry_run.status.success(), "{shown}");
    assert!(
        shown.contains(&format!("ConfigMap {nowhere}/settings created (dry run)")),
        "{shown}"
    );
}

#[tokio::test]
async fn an_orphan_kept_with_prune_off_is_counted_in_tether_status() {
    let ns = installed("cli-orphans").await;
    let _controller = run_controller(&ns, "only");
    let repo = Repo::new();
    repo.commit(
        &[
            ("app/settings.yaml", config_map("settings", "hello")),
            ("app/old.yaml", config_map("old", "bye")),
        ],
        "two ConfigMaps",
    );
    create_app(&ns, &repo, json!({"automated": true, "prune": false}));
    let first = repo.head();
    tether_testkit::eventually("both applied", || async {
        let table = tether_ok(&ns, &["status", "-n", &ns.name]);
        table.contains(&first[..12]).then_some(())
    })
    .await;
    repo.git(&["rm", "-q", "app/old.yaml"]);
    repo.commit_all("old goes from Git");
    let row = tether_testkit::eventually("the orphan counted", || async {
        let table = tether_ok(&ns, &["status", "-n", &ns.name]);
        let row = table.lines().find(|l| l.starts_with("shop "))?.to_string();
        row.contains(" Synced ")
            .then_some((table, row))
            .filter(|(_, row)| row.contains("no longer in Git"))
    })
    .await;
    let (table, row) = row;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    let cells: Vec<&str> = row.split_whitespace().collect();
    let at = |column: &str| cells[header.iter().position(|h| *h == column).unwrap()];
    assert_eq!(at("DRIFT"), "0", "{table}");
    assert_eq!(at("ORPHANS"), "1", "{table}");
}
