//! `tether app create` as a newcomer uses it: no `--renderer`, the renderer
//! detected from the repository (plain YAML, a Kustomize overlay over a
//! base, a Helm chart with a values file and `--helm-set`, Jsonnet with an
//! external variable or a top-level argument), each app Synced by a real
//! `tether run`; `--dry-run -o yaml` prints the Application and creates
//! nothing; a kustomization read as plain YAML says which renderer it
//! needs; and `tether status NAME` shows the conditions and the last
//! operation.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use support::{Repo, assert_lines, config_map, installed, run_controller, tether, tether_ok, text};
use tether_controller::api::Application;
use tether_core::SyncStatus;
use tether_source::Renderer;
use tether_testkit::{TestNamespace, status_of};

/// `tether app create NAME --repo URL --path PATH --dest-namespace NS ARGS`.
fn create(ns: &TestNamespace, repo: &Repo, name: &str, path: &str, extra: &[&str]) -> String {
    let url = repo.url();
    let mut args = vec![
        "app",
        "create",
        name,
        "-n",
        &ns.name,
        "--repo",
        &url,
        "--path",
        path,
        "--dest-namespace",
        &ns.name,
    ];
    args.extend_from_slice(extra);
    let output = tether(ns, &args);
    let shown = text(&output);
    assert!(output.status.success(), "{shown}");
    shown
}

/// Application `name` once the controller reports it Synced.
async fn synced(ns: &TestNamespace, name: &str) -> Application {
    let apps: Api<Application> = ns.api();
    status_of(&apps, name, &format!("{name} Synced"), |status| {
        status.sync.status == SyncStatus::Synced
    })
    .await;
    apps.get(name).await.unwrap()
}

/// The `greeting` of ConfigMap `name` in the test namespace.
async fn greeting(ns: &TestNamespace, name: &str) -> String {
    let config_maps: Api<ConfigMap> = ns.api();
    let config_map = config_maps.get(name).await.unwrap();
    config_map.data.unwrap_or_default()["greeting"].clone()
}

const KUSTOMIZE_BASE: &str = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - settings.yaml\n";
const KUSTOMIZE_OVERLAY: &str = "resources:\n  - ../../base\nnamePrefix: prod-\n";
const CHART: &str = "apiVersion: v2\nname: web\nversion: 0.1.0\n";
const CHART_TEMPLATE: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\ndata:\n  greeting: {{ .Values.greeting | quote }}\n  size: {{ .Values.size | quote }}\n";
const JSONNET: &str = "{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'guestbook' }, data: { greeting: std.extVar('greeting') } }\n";

#[tokio::test(flavor = "multi_thread")]
async fn app_create_detects_each_renderer_and_each_app_syncs() {
    let ns = installed("cli-create").await;
    let repo = Repo::new();
    repo.commit(
        &[
            (
                "plain/settings.yaml",
                config_map("plain", "from plain YAML"),
            ),
            ("kustomize/base/kustomization.yaml", KUSTOMIZE_BASE.into()),
            (
                "kustomize/base/settings.yaml",
                config_map("settings", "from the base"),
            ),
            (
                "kustomize/overlays/prod/kustomization.yaml",
                KUSTOMIZE_OVERLAY.into(),
            ),
            ("chart/Chart.yaml", CHART.into()),
            (
                "chart/values.yaml",
                "greeting: default\nsize: small\n".into(),
            ),
            (
                "chart/values-prod.yaml",
                "greeting: from prod values\n".into(),
            ),
            ("chart/templates/settings.yaml", CHART_TEMPLATE.into()),
            ("jsonnet/guestbook.jsonnet", JSONNET.into()),
            ("jsonnet/lib.libsonnet", "{}\n".into()),
        ],
        "one app per renderer",
    );
    let _controller = run_controller(&ns, "create");

    let said = create(&ns, &repo, "plain", "plain", &[]);
    assert!(said.contains("renderer: directory (detected"), "{said}");
    let said = create(&ns, &repo, "kustomize", "kustomize/overlays/prod", &[]);
    assert!(
        said.contains(
            "renderer: kustomize (detected from kustomize/overlays/prod/kustomization.yaml"
        ),
        "{said}"
    );
    let said = create(
        &ns,
        &repo,
        "chart",
        "chart",
        &[
            "--helm-values",
            "values-prod.yaml",
            "--helm-set",
            "size=large",
        ],
    );
    assert!(
        said.contains("renderer: helm (detected from chart/Chart.yaml"),
        "{said}"
    );
    let said = create(
        &ns,
        &repo,
        "guestbook",
        "jsonnet",
        &["--jsonnet-ext-var", "greeting=from jsonnet"],
    );
    assert!(
        said.contains("renderer: jsonnet (detected from jsonnet/guestbook.jsonnet"),
        "{said}"
    );

    let renderer = |app: &Application| app.spec.source.renderer.name();
    assert_eq!(renderer(&synced(&ns, "plain").await), "directory");
    assert_eq!(greeting(&ns, "plain").await, "from plain YAML");
    assert_eq!(renderer(&synced(&ns, "kustomize").await), "kustomize");
    assert_eq!(greeting(&ns, "prod-settings").await, "from the base");
    let chart = synced(&ns, "chart").await;
    let Renderer::Helm(helm) = &chart.spec.source.renderer else {
        panic!("{:?}", chart.spec.source)
    };
    assert_eq!(helm.value_files, ["values-prod.yaml"]);
    assert_eq!(greeting(&ns, "chart-settings").await, "from prod values");
    let config_maps: Api<ConfigMap> = ns.api();
    let settings = config_maps.get("chart-settings").await.unwrap();
    assert_eq!(settings.data.unwrap()["size"], "large");
    let guestbook = synced(&ns, "guestbook").await;
    let Renderer::Jsonnet(jsonnet) = &guestbook.spec.source.renderer else {
        panic!("{:?}", guestbook.spec.source)
    };
    assert_eq!(jsonnet.main, "guestbook.jsonnet");
    assert_eq!(greeting(&ns, "guestbook").await, "from jsonnet");
}

/// Needs Jsonnet top-level arguments in the renderer and `tlas` in the
/// Application schema (issue 14, item 6).
#[tokio::test(flavor = "multi_thread")]
async fn app_create_passes_jsonnet_top_level_arguments() {
    let ns = installed("cli-create-tla").await;
    let repo = Repo::new();
    let program = "function(greeting, replicas='1') { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'tla' }, data: { greeting: greeting, replicas: replicas } }\n";
    repo.commit(&[("app/main.jsonnet", program)], "a function of its TLAs");
    let _controller = run_controller(&ns, "create-tla");
    let said = create(
        &ns,
        &repo,
        "tla",
        "app",
        &["--jsonnet-tla", "greeting=from a TLA"],
    );
    assert!(
        said.contains("renderer: jsonnet (detected from app/main.jsonnet"),
        "{said}"
    );
    let app = synced(&ns, "tla").await;
    let Renderer::Jsonnet(jsonnet) = &app.spec.source.renderer else {
        panic!("{:?}", app.spec.source)
    };
    assert_eq!(jsonnet.tlas["greeting"], "from a TLA");
    assert_eq!(greeting(&ns, "tla").await, "from a TLA");
}

#[tokio::test]
async fn app_create_dry_run_prints_the_application_and_creates_nothing() {
    let ns = installed("cli-create-dry").await;
    let repo = Repo::new();
    repo.commit(
        &[
            ("chart/Chart.yaml", CHART),
            ("chart/values-prod.yaml", "greeting: prod\n"),
            ("chart/templates/settings.yaml", CHART_TEMPLATE),
        ],
        "a chart",
    );
    let url = repo.url();
    let args = |format: &str| {
        vec![
            "app",
            "create",
            "web",
            "-n",
            &ns.name,
            "--repo",
            &url,
            "--path",
            "chart",
            "--dest-namespace",
            "web",
            "--revision",
            "main",
            "--helm-values",
            "values-prod.yaml",
            "--helm-set",
            "image.tag=1.4.2",
            "--prune",
            "--create-namespace",
            "--interval",
            "10s",
            "--dry-run",
            "-o",
        ]
        .into_iter()
        .map(str::to_string)
        .chain([format.to_string()])
        .collect::<Vec<_>>()
    };
    let yaml = tether_ok(
        &ns,
        &args("yaml").iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let app: Application = serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{e}:\n{yaml}"));
    let json = tether_ok(
        &ns,
        &args("json").iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let from_json: Application = serde_json::from_str(&json).unwrap();
    assert_eq!(app.spec, from_json.spec);
    assert_eq!(app.metadata, from_json.metadata);
    assert_eq!(app.metadata.name.as_deref(), Some("web"));
    let source = &app.spec.source;
    assert_eq!(
        (source.revision.as_str(), source.path.as_str()),
        ("main", "chart")
    );
    assert_eq!(source.interval.as_deref(), Some("10s"));
    let Renderer::Helm(helm) = &source.renderer else {
        panic!("{source:?}")
    };
    assert_eq!(helm.value_files, ["values-prod.yaml"]);
    let values: serde_json::Value = serde_saphyr::from_str(&helm.values).unwrap();
    assert_eq!(values, serde_json::json!({"image": {"tag": "1.4.2"}}));
    assert!(app.spec.sync_policy.prune && app.spec.sync_policy.create_namespace);
    assert_eq!(app.spec.destination.namespace, "web");

    let apps: Api<Application> = ns.api();
    assert!(apps.get_opt("web").await.unwrap().is_none(), "created");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kustomization_read_as_plain_yaml_says_so_and_status_shows_the_detail() {
    let ns = installed("cli-create-hint").await;
    let repo = Repo::new();
    repo.commit(
        &[
            ("app/kustomization.yaml", KUSTOMIZE_BASE.to_string()),
            ("app/settings.yaml", config_map("settings", "hello")),
        ],
        "a kustomization",
    );
    let _controller = run_controller(&ns, "hint");
    create(&ns, &repo, "shop", "app", &["--renderer", "directory"]);
    let apps: Api<Application> = ns.api();
    let status = status_of(&apps, "shop", "the render to fail", |status| {
        status.conditions.iter().any(|c| c.reason == "RenderFailed")
    })
    .await;
    let failed = status
        .conditions
        .iter()
        .find(|c| c.reason == "RenderFailed")
        .unwrap();
    assert!(
        failed
            .message
            .contains("app/kustomization.yaml:1: missing field `metadata`")
            && failed.message.contains(
                "this directory holds a kustomization (app/kustomization.yaml), not plain manifests"
            )
            && failed.message.contains("--renderer kustomize"),
        "{}",
        failed.message
    );

    // The detail view names the condition with its reason and message.
    let shown = tether_ok(&ns, &["status", "shop", "-n", &ns.name]);
    assert_lines(
        &shown,
        &[
            format!("Application:  {}/shop", ns.name),
            "  Renderer:   directory".to_string(),
            "Conditions:".to_string(),
        ],
    );
    assert!(shown.contains("(RenderFailed)"), "{shown}");
    assert!(
        shown.contains("this directory holds a kustomization"),
        "{shown}"
    );

    // Recreated without --renderer: detected, synced, and the last
    // operation shows in the detail view.
    let said = create(&ns, &repo, "shop", "app", &[]);
    assert!(said.contains("renderer: kustomize (detected"), "{said}");
    assert!(
        said.contains(&format!("Application {}/shop configured", ns.name)),
        "{said}"
    );
    // A sync that creates an object reports it Progressing; the pass
    // after it reads the object's status and says Healthy.
    status_of(&apps, "shop", "a successful sync, then Healthy", |status| {
        support::converged(status)
            && status
                .operation_state
                .as_ref()
                .is_some_and(|op| op.phase == tether_core::OperationPhase::Succeeded)
    })
    .await;
    let shown = tether_ok(&ns, &["status", "shop", "-n", &ns.name]);
    assert_lines(
        &shown,
        &[
            "  Renderer:   kustomize",
            "Last operation:",
            "  Phase:      Succeeded",
            "Drift:        none",
            "Orphans:      none",
        ],
    );
    assert!(
        shown.contains("Status:       Synced × Healthy → Converged"),
        "{shown}"
    );
    assert!(shown.contains("  Reconciled True ("), "{shown}");
    assert!(
        shown
            .lines()
            .any(|l| l.starts_with("  Changes:    ") && l.contains(" of 1 objects")),
        "{shown}"
    );
    // The table stays as it was.
    let table = tether_ok(&ns, &["status", "-n", &ns.name]);
    assert!(table.starts_with("NAME"), "{table}");
}
