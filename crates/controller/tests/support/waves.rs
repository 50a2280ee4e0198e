//! Two sync waves, as the tests of Tether's own wave annotation and of
//! Argo CD's write them: a Deployment, then a ConfigMap that waits for it.

use kube::api::Api;
use tether_controller::api::{Application, ApplicationStatus};
use tether_testkit::{TestNamespace, status_where};

/// Wave 0: Deployment `web` running `image`; wave 1: ConfigMap
/// `after-web`; the wave of each set by the annotation `annotation`.
pub fn two_waves(annotation: &str, image: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "app/web.yaml",
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  annotations:\n    {annotation}: \"0\"\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n        - name: web\n          image: {image}\n"
            ),
        ),
        (
            "app/config.yaml",
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: after-web\n  annotations:\n    {annotation}: \"1\"\ndata:\n  ready: \"yes\"\n"
            ),
        ),
    ]
}

/// The status of `ns`'s app once `commit` is Synced and Healthy, checked
/// to have changed the wave-0 Deployment before the wave-1 ConfigMap.
pub async fn synced_wave_by_wave(
    ns: &TestNamespace,
    apps: &Api<Application>,
    commit: &str,
) -> ApplicationStatus {
    let status = status_where(apps, "Synced and Healthy", |s| {
        s.sync.revision.as_deref() == Some(commit)
            && s.sync.status == "Synced"
            && s.health.status == "Healthy"
    })
    .await;
    let order: Vec<&str> = status
        .operation_state
        .as_ref()
        .unwrap()
        .changes
        .iter()
        .map(|c| c.object.as_str())
        .collect();
    assert_eq!(
        order,
        [
            format!("Deployment {}/web", ns.name),
            format!("ConfigMap {}/after-web", ns.name)
        ]
    );
    status
}
