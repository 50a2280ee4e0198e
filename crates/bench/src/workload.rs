//! The workload: one Git repository with a directory per application, and
//! the same objects rendered as plain files for kubectl.

use crate::apps::app_name;

/// Objects per benchmark application: 6 ConfigMaps, a ServiceAccount,
/// 2 Services and a Deployment. The Services are headless: kube-local's
/// service range is a /24, too small for 1,200 cluster IPs.
pub const OBJECTS_PER_APP: usize = 10;

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

/// The files of `n` benchmark applications in the bench repository, one
/// directory each: `apps/app-000/…`.
pub fn repo_files(n: usize) -> Vec<(String, String)> {
    let mut files = Vec::with_capacity(n * OBJECTS_PER_APP);
    for i in 0..n {
        let app = app_name(i);
        for (file, text) in app_files(&app, None) {
            files.push((format!("apps/{app}/{file}"), text));
        }
    }
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
