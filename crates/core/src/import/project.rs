//! Argo CD `AppProject` → Tether `Project`: repositories, destinations,
//! kinds and sync windows. Argo CD's projects hold apps by name wherever
//! they are; Tether's claim namespaces, so the imported Project claims the
//! namespace the imported Applications go to.

use serde_json::{Map, Value, json};

use super::report::{Fields, Finding, Report};
use super::{IMPORTED_FROM_ANNOTATION, Input, Options, host_name};

const SPEC_REASONS: &[(&str, &str)] = &[
    (
        "roles",
        "Tether leaves who may do what to Kubernetes RBAC (Roles on Applications, the \
         tether-tenant ClusterRole)",
    ),
    (
        "orphanedResources",
        "Tether reports other writers of its own objects, not objects outside every app",
    ),
    (
        "destinationServiceAccounts",
        "Tether applies as the ServiceAccount each Application names (spec.serviceAccountName, \
         in the app's namespace)",
    ),
    (
        "permitOnlyProjectScopedClusters",
        "Tether's registered clusters are not scoped to projects; list them in \
         destinationClusters",
    ),
];

/// Converts the AppProject of `input`.
pub fn project(input: &Input, options: &Options) -> (Value, Vec<Finding>) {
    let mut report = Report::of(input);
    let name = input.name();
    let namespace = super::target_namespace(options, input.namespace());
    if name == crate::project::DEFAULT_PROJECT {
        report.note(
            "metadata.name",
            "Tether's Project default holds every app of a namespace no other Project claims, \
             and once it exists those apps are held to it (no file:// sources, for one): leave \
             it out unless that is meant",
        );
    }
    let mut spec = Fields::spec(input);
    let mut out = Map::new();
    if let Some(description) = spec.text("description") {
        out.insert("description".into(), json!(description));
    }
    let mut claims = vec![namespace];
    claims.extend(
        spec.list("sourceNamespaces")
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string),
    );
    claims.dedup();
    out.insert("applicationNamespaces".into(), json!(claims));
    let repos: Vec<String> = spec
        .list("sourceRepos")
        .iter()
        .filter_map(Value::as_str)
        // Argo CD's `*` matches across `/`; Tether's `**` does.
        .map(|repo| {
            if repo == "*" {
                "**".to_string()
            } else {
                repo.to_string()
            }
        })
        .collect();
    out.insert("sourceRepos".into(), json!(repos));
    destinations(spec.list("destinations"), &mut out, &mut report);
    for (argo, tether, rule) in [
        ("clusterResourceWhitelist", "clusterResources", "allow"),
        ("clusterResourceBlacklist", "clusterResources", "deny"),
        ("namespaceResourceWhitelist", "namespacedResources", "allow"),
        ("namespaceResourceBlacklist", "namespacedResources", "deny"),
    ] {
        let at = spec.at(argo);
        let Some(Value::Array(kinds)) = spec.take(argo) else {
            continue;
        };
        let kinds: Vec<Value> = kinds
            .iter()
            .map(|k| json!({"group": k["group"].as_str().unwrap_or(""), "kind": k["kind"].as_str().unwrap_or("*")}))
            .collect();
        if kinds.iter().any(|k| k["kind"] == "*" && k["group"] == "*") && rule == "deny" {
            report.note(&at, "denies every kind");
        }
        let entry = out
            .entry(tether)
            .or_insert_with(|| Value::Object(Map::new()));
        entry[rule] = Value::Array(kinds);
    }
    let windows = windows(spec.list("syncWindows"), &mut report);
    if !windows.is_empty() {
        out.insert("syncWindows".into(), Value::Array(windows));
    }
    let keys_at = spec.at("signatureKeys");
    if !spec.list("signatureKeys").is_empty() {
        out.insert("requireVerification".into(), json!(true));
        report.note(
            &keys_at,
            "Tether requires verification (requireVerification: true) but takes the trusted \
             keys themselves, ASCII-armored, in each app's source.verify.openpgpKeys, not key IDs",
        );
    }
    report.leftovers(spec, SPEC_REASONS, "Tether's Project has no such field");
    let project = json!({
        "apiVersion": "tether.dev/v1alpha1",
        "kind": "Project",
        "metadata": {
            "name": name,
            "annotations": {IMPORTED_FROM_ANNOTATION: format!("argocd {}", report.object)},
        },
        "spec": out,
    });
    (project, report.findings)
}

/// `destinations` as destination namespaces and clusters. Argo CD pairs
/// each namespace with a cluster; Tether allows each namespace on each
/// allowed cluster.
fn destinations(destinations: Vec<Value>, out: &mut Map<String, Value>, report: &mut Report<'_>) {
    let mut namespaces: Vec<String> = Vec::new();
    let mut clusters: Vec<String> = Vec::new();
    for (index, destination) in destinations.iter().enumerate() {
        let at = format!("spec.destinations[{index}]");
        let namespace = destination["namespace"].as_str().unwrap_or("*");
        if namespace.starts_with('!') {
            report.not_mapped(
                &format!("{at}.namespace"),
                format!(
                    "{namespace}: Tether's patterns allow, never deny; list the namespaces allowed"
                ),
            );
            continue;
        }
        if !namespaces.iter().any(|n| n == namespace) {
            namespaces.push(namespace.to_string());
        }
        let server = destination["server"].as_str();
        let name = destination["name"].as_str();
        let cluster = match (name, server) {
            (Some("in-cluster"), _) => None,
            (None, Some(server))
                if server.trim_end_matches('/') == "https://kubernetes.default.svc" =>
            {
                None
            }
            (Some(name), _) => Some(name.to_string()),
            (None, Some("*")) => Some("*".to_string()),
            (None, Some(server)) => Some(host_name(server)),
            (None, None) => None,
        };
        if let Some(cluster) = cluster
            && !clusters.contains(&cluster)
        {
            clusters.push(cluster);
        }
    }
    if namespaces.len() > 1 && !clusters.is_empty() {
        report.note(
            "spec.destinations",
            "Tether allows every listed namespace on every listed cluster, not each namespace on \
             its own cluster only",
        );
    }
    if !namespaces.is_empty() {
        out.insert("destinationNamespaces".into(), json!(namespaces));
    }
    if !clusters.is_empty() {
        out.insert("destinationClusters".into(), json!(clusters));
    }
}

/// `syncWindows`: Tether's project windows select apps by name only.
fn windows(windows: Vec<Value>, report: &mut Report<'_>) -> Vec<Value> {
    let mut out = Vec::new();
    for (index, window) in windows.iter().enumerate() {
        let mut fields = Fields::of(Some(window), &format!("spec.syncWindows[{index}]"));
        let mut converted = fields.texts(&["kind", "schedule", "duration", "timeZone"]);
        if fields.flag("manualSync") == Some(true) {
            converted.insert("manualSync".into(), json!(true));
        }
        let applications = fields.list("applications");
        if !applications.is_empty() {
            converted.insert("applications".into(), Value::Array(applications));
        }
        report.leftovers(
            fields,
            &[
                (
                    "namespaces",
                    "Tether's project windows select apps by name only",
                ),
                (
                    "clusters",
                    "Tether's project windows select apps by name only",
                ),
                (
                    "andOperator",
                    "Tether's project windows select apps by name only",
                ),
                ("description", "Tether's windows have no description"),
            ],
            "Tether's sync windows have no such field",
        );
        out.push(Value::Object(converted));
    }
    out
}
