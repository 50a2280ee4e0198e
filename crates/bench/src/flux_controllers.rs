//! Flux's source-controller and kustomize-controller as host processes
//! against the bench's kube-local, and the Flux objects the benchmark makes:
//! one GitRepository and a Kustomization per app. The binaries come from
//! `scripts/build-flux.sh` (built from Flux's Go modules, cached).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use serde_json::json;

use crate::apps::{apply, run_all};
use crate::tether::free_loopback_addr;

/// Runs `scripts/build-flux.sh` (a no-op once built) and returns the
/// directory holding the binaries and `crds/`.
pub fn build() -> anyhow::Result<PathBuf> {
    let script = tether_testkit::repo_root().join("scripts/build-flux.sh");
    let output = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("{}: running", script.display()))?;
    if !output.status.success() {
        bail!(
            "{}: failed ({}); see its output above",
            script.display(),
            output.status
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let dir = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    if !dir.join("kustomize-controller").exists() {
        bail!("{}: printed no build directory", script.display());
    }
    Ok(dir)
}

/// Applies Flux's CRDs (from the build directory) with `kubectl`.
pub fn install_crds(flux: &Path, admin_kubeconfig: &Path) -> anyhow::Result<()> {
    tether_testkit::run_ok(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(admin_kubeconfig)
            .args(["apply", "--server-side", "-f"])
            .arg(flux.join("crds")),
    );
    Ok(())
}

/// Both controllers, each under its own certificate user; stopped
/// (SIGTERM, then SIGKILL) when dropped.
pub struct Flux {
    children: Vec<(&'static str, Child)>,
}

/// How one pair of controllers is started.
pub struct Start<'a> {
    pub flux: &'a Path,
    /// Their runtime namespace (events, and where the bench puts its Flux
    /// objects).
    pub namespace: &'a str,
    /// Kubeconfigs of source-controller's and kustomize-controller's users.
    pub kubeconfigs: [&'a Path; 2],
    /// Their storage and logs.
    pub dir: &'a Path,
}

impl Flux {
    pub async fn start(start: &Start<'_>) -> anyhow::Result<Flux> {
        std::fs::create_dir_all(start.dir.join("storage"))?;
        let storage = free_loopback_addr()?.to_string();
        let source_health = free_loopback_addr()?;
        let kustomize_health = free_loopback_addr()?;
        let spawn = |name: &'static str, kubeconfig: &Path, args: Vec<String>| {
            let log = std::fs::File::create(start.dir.join(format!("{name}.log")))?;
            let child = Command::new(start.flux.join(name))
                .args(args)
                .env("KUBECONFIG", kubeconfig)
                .env("RUNTIME_NAMESPACE", start.namespace)
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()
                .with_context(|| format!("{name}: starting"))?;
            anyhow::Ok((name, child))
        };
        let common = |health: std::net::SocketAddr| {
            vec![
                "--watch-all-namespaces=true".to_string(),
                "--enable-leader-election=false".into(),
                format!(
                    "--metrics-addr={}",
                    free_loopback_addr()
                        .map(|a| a.to_string())
                        .unwrap_or_default()
                ),
                format!("--health-addr={health}"),
                "--log-level=info".into(),
            ]
        };
        let mut source_args = common(source_health);
        source_args.extend([
            format!("--storage-addr={storage}"),
            format!("--storage-adv-addr={storage}"),
            format!("--storage-path={}", start.dir.join("storage").display()),
        ]);
        let flux = Flux {
            children: vec![
                spawn("source-controller", start.kubeconfigs[0], source_args)?,
                spawn(
                    "kustomize-controller",
                    start.kubeconfigs[1],
                    common(kustomize_health),
                )?,
            ],
        };
        for health in [source_health, kustomize_health] {
            wait_ready(health).await?;
        }
        Ok(flux)
    }

    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|(_, c)| c.id()).collect()
    }

    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        for (_, child) in &mut self.children {
            let _ = Command::new("kill").arg(child.id().to_string()).status();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for (_, child) in &mut self.children {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        self.children.clear();
    }
}

impl Drop for Flux {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Waits until a controller's `/readyz` answers 200.
async fn wait_ready(health: std::net::SocketAddr) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let url = format!("http://{health}/readyz");
    for _ in 0..600 {
        if let Ok(response) = client.get(&url).send().await
            && response.status().is_success()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("{url}: not ready within 60 s")
}

pub fn kustomizations(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("kustomize.toolkit.fluxcd.io", "v1", "Kustomization");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

pub fn git_repositories(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("source.toolkit.fluxcd.io", "v1", "GitRepository");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// The bench's GitRepository `bench`: `url`, branch `main`, `interval`.
pub async fn create_git_repository(
    client: &kube::Client,
    namespace: &str,
    url: &str,
    interval: &str,
) -> anyhow::Result<()> {
    let object = json!({"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": "bench", "namespace": namespace},
        "spec": {"interval": interval, "url": url, "ref": {"branch": "main"}}});
    apply(&git_repositories(client, namespace), "bench", &object)
        .await
        .with_context(|| format!("GitRepository {namespace}/bench"))?;
    Ok(())
}

/// One Kustomization: its name, its path in the repository and the
/// namespace its objects go to.
pub struct Kustomization {
    pub name: String,
    pub path: String,
    pub target_namespace: String,
}

/// Creates `list` in `namespace`, each from GitRepository `bench`, pruning,
/// not forcing, every `interval`, labelled `bench=LABEL`.
pub async fn create_kustomizations(
    client: &kube::Client,
    namespace: &str,
    label: &str,
    interval: &str,
    list: &[Kustomization],
) -> anyhow::Result<()> {
    let api = kustomizations(client, namespace);
    run_all(
        8,
        list.iter().map(|k| {
            let object = json!({"apiVersion": "kustomize.toolkit.fluxcd.io/v1",
                "kind": "Kustomization",
                "metadata": {"name": k.name, "namespace": namespace, "labels": {"bench": label}},
                "spec": {"interval": interval, "path": k.path, "prune": true, "force": false,
                         "targetNamespace": k.target_namespace,
                         "sourceRef": {"kind": "GitRepository", "name": "bench"}}});
            let api = &api;
            async move {
                let applied = apply(api, &k.name, &object).await;
                applied.with_context(|| format!("Kustomization {namespace}/{}", k.name))
            }
        }),
    )
    .await
}

/// Whether Kustomization `k` has applied `commit` (its
/// `status.lastAppliedRevision` is `main@sha1:COMMIT`).
pub fn applied_at(k: &DynamicObject, commit: &str) -> bool {
    k.data
        .pointer("/status/lastAppliedRevision")
        .and_then(|v| v.as_str())
        .is_some_and(|r| r.ends_with(commit))
}

/// Polls until `n` Kustomizations labelled `bench=LABEL` have applied
/// `commit`, or `limit` has passed.
pub async fn wait_applied(
    client: &kube::Client,
    namespace: &str,
    label: &str,
    n: usize,
    commit: &str,
    limit: Duration,
) -> anyhow::Result<()> {
    let api = kustomizations(client, namespace);
    let deadline = Instant::now() + limit;
    loop {
        let list = api
            .list(&ListParams::default().labels(&format!("bench={label}")))
            .await?;
        let applied = list.items.iter().filter(|k| applied_at(k, commit)).count();
        if applied >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "Kustomizations {namespace} bench={label}: only {applied}/{n} applied {commit} after {} s",
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Asks source-controller to fetch now, as `flux reconcile source git` and
/// the notification-controller's Receiver do: annotates the GitRepository
/// with `reconcile.fluxcd.io/requestedAt`.
pub async fn request_reconcile(client: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    let patch = json!({"metadata": {"annotations": {
        "reconcile.fluxcd.io/requestedAt": Timestamp::now().to_string()}}});
    git_repositories(client, namespace)
        .patch("bench", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("GitRepository {namespace}/bench: annotating"))?;
    Ok(())
}

/// Suspends every Flux object in `namespace`, so controllers started later
/// leave them alone.
pub async fn suspend_all(client: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    let patch = json!({"spec": {"suspend": true}});
    for api in [
        kustomizations(client, namespace),
        git_repositories(client, namespace),
    ] {
        let names: Vec<String> = api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .collect();
        run_all(
            16,
            names.iter().map(|name| {
                let api = &api;
                let patch = &patch;
                async move {
                    let patched = api
                        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                        .await;
                    patched
                        .map(drop)
                        .with_context(|| format!("{namespace}/{name}: suspending"))
                }
            }),
        )
        .await?;
    }
    Ok(())
}
