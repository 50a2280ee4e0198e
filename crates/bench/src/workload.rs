//! The workload: one Git repository with a directory per application, and
//! the same objects rendered as plain files for kubectl.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// Objects per benchmark application: 6 ConfigMaps, a ServiceAccount,
/// 2 Services and a Deployment. The Services are headless: kube-local's
/// service range is a /24, too small for 1,200 cluster IPs.
pub const OBJECTS_PER_APP: usize = 10;

/// A Git repository on disk, served over file://.
pub struct Repo {
    pub dir: PathBuf,
}

impl Repo {
    pub fn create(dir: &Path) -> anyhow::Result<Repo> {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        let repo = Repo {
            dir: dir.to_path_buf(),
        };
        repo.git(&["init", "-q", "-b", "main"])?;
        Ok(repo)
    }

    pub fn url(&self) -> String {
        format!("file://{}", self.dir.display())
    }

    /// Writes `files` (path, text) and commits them; returns the commit id.
    pub fn commit(&self, files: &[(String, String)], message: &str) -> anyhow::Result<String> {
        for (path, text) in files {
            let path = self.dir.join(path);
            std::fs::create_dir_all(path.parent().expect("has parent"))?;
            std::fs::write(path, text)?;
        }
        self.git(&["add", "-A"])?;
        self.git(&["commit", "-q", "-m", message])?;
        self.git(&["rev-parse", "HEAD"])
    }

    /// The current commit.
    pub fn head(&self) -> anyhow::Result<String> {
        self.git(&["rev-parse", "HEAD"])
    }

    /// The paths commit `id` changed, as a push webhook lists them: added,
    /// modified and removed.
    pub fn changed(&self, id: &str) -> anyhow::Result<[Vec<String>; 3]> {
        let listed = self.git(&["diff-tree", "--no-commit-id", "-r", "--name-status", id])?;
        let mut lists: [Vec<String>; 3] = Default::default();
        for line in listed.lines() {
            let (status, path) = line.split_once('\t').context("a name-status line")?;
            let list = match status {
                "A" => 0,
                "D" => 2,
                _ => 1,
            };
            lists[list].push(path.to_string());
        }
        Ok(lists)
    }

    fn git(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = Command::new("git")
            .args([
                "-c",
                "user.name=Bench",
                "-c",
                "user.email=bench@example.com",
            ])
            .args(args)
            .current_dir(&self.dir)
            .output()
            .context("running git")?;
        if !output.status.success() {
            bail!("git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        }
        Ok(String::from_utf8(output.stdout)?.trim().to_string())
    }
}

/// The files of benchmark application `app` (file name, YAML), each
/// object in `namespace` when given (kubectl's one-call form) or without
/// one (Tether's destination and `kubectl -n` fill it in).
pub fn app_files(app: &str, namespace: Option<&str>) -> Vec<(String, String)> {
    let ns = namespace
        .map(|ns| format!("\n  namespace: {ns}"))
        .unwrap_or_default();
    let mut files = Vec::with_capacity(OBJECTS_PER_APP);
    for i in 0..6 {
        files.push((
            format!("config-{i}.yaml"),
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {app}-config-{i}{ns}\ndata:\n  index: \"{i}\"\n  app: {app}\n  settings.ini: |\n    [server]\n    port = 8080\n    workers = 4\n"
            ),
        ));
    }
    files.push((
        "serviceaccount.yaml".into(),
        format!("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {app}{ns}\n"),
    ));
    for (name, port) in [("http", 80), ("metrics", 9090)] {
        files.push((
            format!("service-{name}.yaml"),
            format!(
                "apiVersion: v1\nkind: Service\nmetadata:\n  name: {app}-{name}{ns}\nspec:\n  clusterIP: None\n  selector:\n    app: {app}\n  ports:\n    - name: {name}\n      port: {port}\n      targetPort: {port}\n"
            ),
        ));
    }
    files.push((
        "deployment.yaml".into(),
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {app}{ns}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: {app}}}\n  template:\n    metadata:\n      labels: {{app: {app}}}\n    spec:\n      serviceAccountName: {app}\n      containers:\n        - name: web\n          image: nginx:1.27\n          ports:\n            - containerPort: 80\n"
        ),
    ));
    files
}

/// The latency application: `count` ConfigMaps, the first carrying `round`.
pub fn latency_files(count: usize, round: usize) -> Vec<(String, String)> {
    (0..count)
        .map(|i| {
            let value = if i == 0 { round } else { 0 };
            (
                format!("apps/latency/config-{i:02}.yaml"),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: latency-{i:02}\ndata:\n  round: \"{value}\"\n"
                ),
            )
        })
        .collect()
}
