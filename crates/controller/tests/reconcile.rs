//! The loop end to end against the real local control plane: a real Git
//! repository (file://), the controller running in-process, kubectl making
//! drift.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tether_controller::api::Application;
use tether_controller::{Config, install};
use tether_core::tracking::{APP_LABEL, TRACKING_ANNOTATION};
use tether_testkit::TestNamespace;

const PATIENCE: Duration = Duration::from_secs(60);

struct Repo {
    dir: PathBuf,
}

impl Repo {
    fn new(name: &str) -> Repo {
        let dir = std::env::temp_dir().join(format!("tether-repo-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let repo = Repo { dir };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    fn url(&self) -> String {
        format!("file://{}", self.dir.display())
    }

    fn git(&self, args: &[&str]) -> String {
        let output = Command::new("git")
            .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap().trim().to_string()
    }

    /// Writes `files` and commits them; returns the commit id.
    fn commit(&self, files: &[(&str, String)], message: &str) -> String {
        for (path, text) in files {
            let path = self.dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }
}

fn web(replicas: u32, greeting: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "app/config.yaml",
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  greeting: \"{greeting}\"\n"
            ),
        ),
        (
            "app/web.yaml",
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n"
            ),
        ),
    ]
}

/// Starts a controller for `ns` only, as `tether run --watch-namespace` would.
async fn start_controller(ns: &TestNamespace, cache: &Path) {
    install::install(ns.client.clone(), &ns.name).await.unwrap();
    let config = Config {
        resync: Duration::from_secs(2),
        cache_dir: cache.to_path_buf(),
        lease_namespace: ns.name.clone(),
        identity: format!("test-{}", ns.name),
        watch_namespace: Some(ns.name.clone()),
        ..Config::default()
    };
    let client = ns.client.clone();
    tokio::spawn(async move {
        if let Err(error) = tether_controller::run(client, config).await {
            panic!("controller stopped: {error}");
        }
    });
}

async fn create_app(ns: &TestNamespace, repo: &Repo) -> Api<Application> {
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &ns.name);
    let app = json!({"apiVersion": "tether.dev/v1alpha1", "kind": "Application",
        "metadata": {"name": "shop", "namespace": ns.name},
        "spec": {"source": {"repoURL": repo.url(), "path": "app"},
                 "destination": {"namespace": ns.name}}});
    apps.patch("shop", &PatchParams::apply("test"), &Patch::Apply(&app))
        .await
        .unwrap();
    apps
}

async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn status_where(
    apps: &Api<Application>,
    what: &str,
    check: impl Fn(&tether_controller::api::ApplicationStatus) -> bool,
) -> tether_controller::api::ApplicationStatus {
    eventually(what, || async {
        let status = apps.get("shop").await.ok()?.status?;
        check(&status).then_some(status)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_application_reaches_synced_and_healthy_and_follows_new_commits() {
    let ns = TestNamespace::create("loop").await;
    let repo = Repo::new(&ns.name);
    let first = repo.commit(&web(2, "hello"), "first");
    let cache = std::env::temp_dir().join(format!("tether-cache-{}", ns.name));
    start_controller(&ns, &cache).await;
    let apps = create_app(&ns, &repo).await;

    let status = status_where(&apps, "Synced + Healthy at the first commit", |s| {
        s.sync.status == "Synced"
            && s.health.status == "Healthy"
            && s.sync.revision.as_deref() == Some(first.as_str())
    })
    .await;
    assert_eq!(status.state.as_deref(), Some("Converged"));
    assert_eq!(status.inventory.len(), 2);
    assert_eq!(status.history.len(), 1);

    // The objects carry Tether's marks and field manager.
    let config = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .get("settings")
        .await
        .unwrap();
    assert_eq!(config.labels()[APP_LABEL], format!("{}.shop", ns.name));
    assert!(config.annotations().contains_key(TRACKING_ANNOTATION));
    let managers: Vec<_> = config
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["tether"]);

    // A new commit: synced at the new revision, with history.
    let second = repo.commit(&web(2, "hello again"), "second");
    let status = status_where(&apps, "Synced at the second commit", |s| {
        s.sync.status == "Synced" && s.sync.revision.as_deref() == Some(second.as_str())
    })
    .await;
    assert_eq!(status.history.len(), 2);
    assert_eq!(status.history[0].revision, second);
    let config = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .get("settings")
        .await
        .unwrap();
    assert_eq!(config.data.unwrap()["greeting"], "hello again");
    let _ = std::fs::remove_dir_all(&repo.dir);
    let _ = std::fs::remove_dir_all(&cache);
}

use kube::ResourceExt;

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_scale_is_reverted_and_a_foreign_label_is_not_drift() {
    let ns = TestNamespace::create("heal").await;
    let repo = Repo::new(&ns.name);
    repo.commit(&web(2, "hello"), "first");
    let cache = std::env::temp_dir().join(format!("tether-cache-{}", ns.name));
    start_controller(&ns, &cache).await;
    let apps = create_app(&ns, &repo).await;
    status_where(&apps, "Synced", |s| s.sync.status == "Synced").await;

    // Someone else's label is not drift: the app stays Synced, the label stays.
    let output = ns.kubectl(&["label", "configmap/settings", "team=payments"]);
    assert!(output.status.success());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let status = apps.get("shop").await.unwrap().status.unwrap();
    assert_eq!(status.sync.status, "Synced");
    let config = Api::<ConfigMap>::namespaced(ns.client.clone(), &ns.name)
        .get("settings")
        .await
        .unwrap();
    assert_eq!(config.labels()["team"], "payments");

    // kubectl scale is reverted.
    let output = ns.kubectl(&["scale", "deployment/web", "--replicas=5"]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let deployments = Api::<Deployment>::namespaced(ns.client.clone(), &ns.name);
    eventually("spec.replicas reverted to 2", || async {
        let replicas = deployments.get("web").await.ok()?.spec?.replicas?;
        (replicas == 2).then_some(())
    })
    .await;
    let status = status_where(&apps, "Synced after self-heal", |s| {
        s.sync.status == "Synced" && s.history.len() >= 2
    })
    .await;
    assert_eq!(status.history[0].initiator, "self-heal");
    let _ = std::fs::remove_dir_all(&repo.dir);
    let _ = std::fs::remove_dir_all(&cache);
}

#[tokio::test(flavor = "multi_thread")]
async fn applications_created_at_once_all_reach_synced() {
    // Several reconciles then wait together for the first list of a newly
    // watched kind; every one of them must be woken.
    let ns = TestNamespace::create("burst").await;
    let repo = Repo::new(&ns.name);
    let mut files = Vec::new();
    for i in 0..8 {
        for (path, text) in web(1, "hi") {
            let text = text.replace("name: settings", &format!("name: settings-{i}"));
            let text = text.replace("name: web\n", &format!("name: web-{i}\n"));
            files.push((path.replace("app/", &format!("app-{i}/")), text));
        }
    }
    let files: Vec<(&str, String)> = files.iter().map(|(p, t)| (p.as_str(), t.clone())).collect();
    repo.commit(&files, "eight apps");
    let cache = std::env::temp_dir().join(format!("tether-cache-{}", ns.name));
    start_controller(&ns, &cache).await;
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &ns.name);
    for i in 0..8 {
        let name = format!("app-{i}");
        let app = json!({"apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": ns.name},
            "spec": {"source": {"repoURL": repo.url(), "path": name},
                     "destination": {"namespace": ns.name}}});
        apps.patch(&name, &PatchParams::apply("test"), &Patch::Apply(&app))
            .await
            .unwrap();
    }
    eventually(
        "all eight Applications Synced, with revision and history",
        || async {
            let list = apps.list(&Default::default()).await.ok()?;
            let synced = list
                .items
                .iter()
                .filter(|a| {
                    a.status.as_ref().is_some_and(|s| {
                        s.sync.status == "Synced"
                            && s.sync.revision.is_some()
                            && s.history.len() == 1
                    })
                })
                .count();
            (synced == 8).then_some(())
        },
    )
    .await;
    let _ = std::fs::remove_dir_all(&repo.dir);
    let _ = std::fs::remove_dir_all(&cache);
}
