//! `tether import` driven like an operator moving from Argo CD or Flux,
//! against the real local control plane and a real `tether run`: an app
//! Argo CD applied is taken over in place (no pod restarted, no rollout);
//! `--from-cluster` reads Argo CD's and Flux's objects with their status;
//! every fixture of `tether_core::import` becomes objects the API server
//! accepts.

mod support;

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use support::{Repo, installed, run_controller, tether, tether_ok, text};
use tether_controller::api::Application;
use tether_testkit::{TestNamespace, eventually, status_of};

const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx:1.27
";

/// The pods of Deployment `web`, once one is Running: (uid, restarts).
async fn running_web_pod(ns: &TestNamespace) -> (String, i32) {
    let pods: Api<Pod> = Api::namespaced(ns.client.clone(), &ns.name);
    eventually("web's pod Running", || async {
        let list = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .ok()?;
        let [pod] = list.items.as_slice() else {
            return None;
        };
        let status = pod.status.as_ref()?;
        (status.phase.as_deref() == Some("Running")).then(|| {
            let restarts = status
                .container_statuses
                .iter()
                .flatten()
                .map(|c| c.restart_count)
                .sum();
            (pod.metadata.uid.clone().unwrap(), restarts)
        })
    })
    .await
}

fn managers(deployment: &Deployment) -> Vec<String> {
    let mut managers: Vec<String> = deployment
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|entry| entry.manager.clone())
        .collect();
    managers.sort();
    managers.dedup();
    managers
}

fn write_temp(ns: &TestNamespace, name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tether-import-{}", ns.name));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_argo_cd_applied_is_taken_over_in_place_with_no_pod_restarted() {
    let ns = installed("import-takeover").await;
    let n = ns.name.as_str();
    let repo = Repo::new();
    repo.commit(&[("app/web.yaml", WEB)], "web");

    // Argo CD applied Git's Deployment with its tracking label and
    // annotation, as its own field manager.
    let tracking_id = format!("web:apps/Deployment:{n}/web");
    let argo_applied = WEB.replace(
        "  name: web\n",
        &format!(
            "  name: web\n  labels:\n    app.kubernetes.io/instance: web\n  annotations:\n    argocd.argoproj.io/tracking-id: {tracking_id}\n"
        ),
    );
    ns.kubectl_ok_with_stdin(
        &[
            "apply",
            "--server-side",
            "--field-manager",
            "argocd-controller",
            "-n",
            n,
            "-f",
            "-",
        ],
        &argo_applied,
    );
    let (pod_uid, restarts) = running_web_pod(&ns).await;
    let deployments: Api<Deployment> = Api::namespaced(ns.client.clone(), n);
    let before = deployments.get("web").await.unwrap();
    assert!(managers(&before).contains(&"argocd-controller".to_string()));
    assert!(!managers(&before).contains(&"tether".to_string()));

    // The Argo CD Application that did it, imported and applied.
    let argo_app = format!(
        "apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: web
  namespace: argocd
spec:
  project: default
  source:
    repoURL: {url}
    targetRevision: HEAD
    path: app
  destination:
    server: https://kubernetes.default.svc
    namespace: {n}
  syncPolicy:
    automated:
      prune: true
      selfHeal: true
",
        url = repo.url()
    );
    let file = write_temp(&ns, "web.yaml", &argo_app);
    let output = tether(
        &ns,
        &["import", "-f", file.to_str().unwrap(), "-n", n, "--apply"],
    );
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
    let shown = text(&output);
    assert!(output.status.success(), "{shown}");
    assert!(
        shown
            .lines()
            .any(|l| l == format!("Application {n}/web created")),
        "{shown}"
    );
    assert!(
        shown.contains("imported 1 Application(s) and 0 Project(s); 0 field(s) not mapped"),
        "{shown}"
    );

    // Tether takes it over: Synced, the same pod, no rollout.
    let _controller = run_controller(&ns, "a");
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), n);
    let status = status_of(&apps, "web", "Synced and Healthy", |s| {
        s.sync.status == "Synced" && s.health.status == "Healthy"
    })
    .await;
    assert!(
        status.inventory.iter().any(|entry| entry.name == "web"),
        "{status:?}"
    );
    let after = deployments.get("web").await.unwrap();
    assert_eq!(after.metadata.uid, before.metadata.uid, "recreated");
    // The generation moves (a Deployment's does when its annotations do:
    // Tether's tracking marks), the template does not: no rollout.
    assert_eq!(
        after.spec.as_ref().unwrap().template,
        before.spec.as_ref().unwrap().template
    );
    // Field ownership moved to Tether: Argo CD's manager is gone, and
    // with it Argo CD from the app's other writers.
    let after_managers = managers(&after);
    assert!(
        after_managers.contains(&"tether".to_string()),
        "{after_managers:?}"
    );
    assert!(
        !after_managers.contains(&"argocd-controller".to_string()),
        "{after_managers:?}"
    );
    let status = status_of(&apps, "web", "no other writer left", |s| {
        s.other_writers.is_empty()
    })
    .await;
    assert!(status.sync.status == "Synced", "{status:?}");
    let annotations = after.metadata.annotations.clone().unwrap_or_default();
    let revision = |d: &Deployment| {
        d.metadata.annotations.clone().unwrap_or_default()["deployment.kubernetes.io/revision"]
            .clone()
    };
    assert_eq!(revision(&after), revision(&before));
    assert_eq!(
        annotations.get("tether.dev/adopted").map(String::as_str),
        Some("true")
    );
    // Argo CD's marks stay (only its field manager owns them): the
    // instance label is often a selector's too.
    assert_eq!(
        after
            .metadata
            .labels
            .unwrap_or_default()
            .get("app.kubernetes.io/instance")
            .map(String::as_str),
        Some("web")
    );
    assert_eq!(running_web_pod(&ns).await, (pod_uid, restarts));
    let replica_sets: Api<ReplicaSet> = Api::namespaced(ns.client.clone(), n);
    let sets = replica_sets.list(&ListParams::default()).await.unwrap();
    assert_eq!(sets.items.len(), 1, "a second ReplicaSet: a rollout");
}

/// A CustomResourceDefinition for Argo CD's or Flux's `kind` (served at
/// `version`), keeping every field, without a status subresource so a
/// test can write status with the object.
fn foreign_crd(group: &str, version: &str, kind: &str) -> Value {
    let singular = kind.to_lowercase();
    let plural = match singular.ends_with('y') {
        true => format!("{}ies", &singular[..singular.len() - 1]),
        false => format!("{singular}s"),
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": plural, "singular": singular, "kind": kind},
            "versions": [{"name": version, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn import_from_cluster_reads_argo_cd_and_flux_objects_with_their_status() {
    let ns = installed("import-cluster").await;
    let n = ns.name.as_str();
    for (group, version, kind) in [
        ("argoproj.io", "v1alpha1", "Application"),
        ("source.toolkit.fluxcd.io", "v1", "GitRepository"),
        ("kustomize.toolkit.fluxcd.io", "v1", "Kustomization"),
    ] {
        let crd = foreign_crd(group, version, kind);
        ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &crd.to_string());
        let name = format!("crd/{}", crd["metadata"]["name"].as_str().unwrap());
        ns.kubectl_ok(&["wait", "--for", "condition=established", &name]);
    }
    let objects = format!(
        "apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {{name: shop, namespace: {n}}}
spec:
  source: {{repoURL: https://git.example.com/shop.git, path: deploy, targetRevision: main}}
  destination: {{server: https://kubernetes.default.svc, namespace: shop}}
  syncPolicy: {{automated: {{selfHeal: true}}}}
status:
  resources:
    - {{kind: Deployment, group: apps, namespace: shop, name: web}}
    - {{kind: ConfigMap, namespace: shop-settings, name: flags}}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {{name: podinfo, namespace: {n}}}
spec: {{url: https://github.com/stefanprodan/podinfo, ref: {{branch: master}}, interval: 1m}}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {{name: podinfo, namespace: {n}}}
spec:
  sourceRef: {{kind: GitRepository, name: podinfo}}
  path: ./kustomize
  prune: true
  interval: 10m
  postBuild: {{substitute: {{env: prod}}}}
status:
  inventory:
    entries:
      - {{id: {n}_podinfo_apps_Deployment, v: v1}}
      - {{id: podinfo-cache_redis_apps_Deployment, v: v1}}
"
    );
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &objects);

    let output = tether(&ns, &["import", "--from-cluster", "--no-detect"]);
    let shown = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{shown}");
    let printed: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .split("\n---\n")
        .filter_map(|doc| serde_saphyr::from_str::<Value>(doc).ok())
        .filter(|o| o.pointer("/metadata/namespace") == Some(&json!(n)))
        .collect();
    let named = |name: &str| {
        printed
            .iter()
            .find(|o| o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {printed:?}"))
    };
    let shop = named("shop");
    assert_eq!(
        shop["spec"]["destination"],
        json!({"namespace": "shop", "allowNamespaces": ["shop-settings"]})
    );
    assert_eq!(shop["spec"]["syncPolicy"]["selfHeal"], json!(true));
    let podinfo = named("podinfo");
    assert_eq!(
        podinfo["spec"]["source"],
        json!({"repoURL": "https://github.com/stefanprodan/podinfo", "revision": "master",
               "interval": "1m", "path": "kustomize"})
    );
    assert_eq!(
        podinfo["spec"]["destination"],
        json!({"namespace": n, "allowNamespaces": ["podinfo-cache"]})
    );
    let tail = format!(
        ": Kustomization {n}/podinfo: field spec.postBuild not mapped: Tether renders without \
         variable substitution (postBuild.substitute/substituteFrom): write the values into the \
         manifests, or use a kustomize overlay or Helm values"
    );
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("cluster:") && l.ends_with(&tail)),
        "no line ending {tail:?} in:\n{shown}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_fixture_imports_into_objects_the_api_server_accepts() {
    let ns = installed("import-fixtures").await;
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../core/tests/fixtures/import");
    let mut args = vec![
        "import".to_string(),
        "--no-detect".into(),
        "-n".into(),
        ns.name.clone(),
    ];
    for case in ["argocd", "flux"] {
        for entry in std::fs::read_dir(fixtures.join(case)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() || (name.ends_with(".yaml") && !name.ends_with(".expected.yaml")) {
                args.extend(["-f".to_string(), path.display().to_string()]);
            }
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let yaml = tether_ok(&ns, &args);
    let applied = ns.kubectl_ok_with_stdin(&["apply", "--dry-run=server", "-f", "-"], &yaml);
    let count = applied
        .lines()
        .filter(|l| l.contains("(server dry run)"))
        .count();
    assert_eq!(count, yaml.matches("\nkind: ").count(), "{applied}");
    assert!(count >= 15, "{applied}");
}
