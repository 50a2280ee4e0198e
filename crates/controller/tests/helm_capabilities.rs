//! Helm charts rendered for the real local control plane: its version
//! satisfies `kubeVersion` constraints and `.Capabilities.APIVersions`
//! lists what it serves, CRDs included — as `helm install` would see it,
//! not Helm's offline default (Kubernetes v1.20.0, built-in APIs only).

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;
use support::{Repo, app, config_for, start_controller_with, status_where};
use tether_core::capabilities::kube_version;
use tether_testkit::{TestNamespace, crd};

/// A chart that refuses Kubernetes before 1.23 and reports what
/// `.Capabilities` says, for the CRD group given in `crdGroup`.
const CHART: [(&str, &str); 2] = [
    (
        "app/Chart.yaml",
        "apiVersion: v2\nname: caps\nversion: 0.1.0\nkubeVersion: \">=1.23.0-0\"\n",
    ),
    (
        "app/templates/cm.yaml",
        r#"apiVersion: v1
kind: ConfigMap
metadata:
  name: capabilities
data:
  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}
  apps: {{ .Capabilities.APIVersions.Has "apps/v1" | quote }}
  deployments: {{ .Capabilities.APIVersions.Has "apps/v1/Deployment" | quote }}
  crd: {{ .Capabilities.APIVersions.Has (printf "%s/v1" .Values.crdGroup) | quote }}
  widgets: {{ .Capabilities.APIVersions.Has (printf "%s/v1/Widget" .Values.crdGroup) | quote }}
  missing: {{ .Capabilities.APIVersions.Has "nothing.example.com/v1" | quote }}
"#,
    ),
];

#[tokio::test(flavor = "multi_thread")]
async fn a_chart_requiring_kubernetes_1_23_renders_for_the_clusters_version_and_apis() {
    let Some(helm) = tether_testkit::tools::helm_dir() else {
        return;
    };
    let ns = TestNamespace::create("helm-caps").await;
    // A CRD only this cluster serves.
    let group = format!("{}.example.com", ns.name);
    let widget = crd(
        &group,
        "Widget",
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    );
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &widget.to_string());
    let crd_name = format!("widgets.{group}");
    ns.kubectl_ok(&[
        "wait",
        "--for=condition=Established",
        &format!("crd/{crd_name}"),
        "--timeout=60s",
    ]);
    let repo = Repo::new();
    repo.commit(&CHART, "a chart that needs Kubernetes 1.23");
    let mut config = config_for(&ns);
    config.sandbox.tool_dirs = vec![helm];
    start_controller_with(&ns, config).await;

    let apps = app(&ns, "shop", &repo, "app")
        .renderer(json!({"helm": {"values": format!("crdGroup: {group}\n")}}))
        .apply(&ns.client)
        .await;
    let status = status_where(&apps, "Synced", |s| s.sync.status == "Synced").await;
    assert_eq!(status.sync.revision.as_deref(), Some(repo.head().as_str()));
    let data = ns.get::<ConfigMap>("capabilities").await.data.unwrap();
    let served = ns.client.apiserver_version().await.unwrap();
    let version = kube_version(&served.git_version, &served.major, &served.minor);
    assert_eq!(data["kubeVersion"], version, "{data:?}");
    assert!(data["kubeVersion"].starts_with("v1.3"), "{data:?}");
    assert_eq!(data["apps"], "true");
    assert_eq!(data["deployments"], "true");
    assert_eq!(data["crd"], "true");
    assert_eq!(data["widgets"], "true");
    assert_eq!(data["missing"], "false");

    let _ = ns.kubectl(&["delete", "crd", &crd_name, "--wait=false"]);
}
