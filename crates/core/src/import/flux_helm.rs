//! Flux `HelmRelease` (with the `HelmRepository`, `GitRepository` or
//! `OCIRepository` its chart comes from) → a Tether Application rendering
//! the chart with `helm template`. Tether applies the rendered objects
//! itself: there is no Helm release, so Helm's install, upgrade, rollback
//! and test actions have no counterpart.

use serde_json::{Map, Value, json};

use super::flux::{Sources, depends_on, flux_application, git_source, oci_version, secret};
use super::report::{Fields, Finding, Report};
use super::{Input, Options, interval};

const NO_RELEASE: &str =
    "Tether renders the chart and applies the objects itself: there is no Helm release";

const RELEASE_REASONS: &[(&str, &str)] = &[
    (
        "valuesFrom",
        "Tether reads values from Git or inline only: move them to a values file in the \
         repository (renderer.helm.valueFiles) or into values",
    ),
    ("install", NO_RELEASE),
    ("upgrade", NO_RELEASE),
    ("rollback", NO_RELEASE),
    ("uninstall", NO_RELEASE),
    ("test", NO_RELEASE),
    ("maxHistory", NO_RELEASE),
    ("storageNamespace", NO_RELEASE),
    ("persistentClient", NO_RELEASE),
    (
        "interval",
        "Tether watches the objects it applies and reverts drift at once",
    ),
    ("timeout", "Tether bounds each step itself"),
    (
        "driftDetection",
        "Tether always detects drift, and reverts it unless syncPolicy.selfHeal is false",
    ),
    (
        "postRenderers",
        "Tether applies the chart's output as rendered: use a kustomize overlay over a \
         rendered chart in Git instead",
    ),
    (
        "kubeConfig",
        "register the cluster with `tether cluster add` and set destination.cluster",
    ),
    (
        "commonMetadata",
        "Tether's helm renderer takes no metadata; set it in the chart's values",
    ),
];

const CHART_REASONS: &[(&str, &str)] = &[
    ("interval", "Tether polls the repository at source.interval"),
    (
        "reconcileStrategy",
        "Tether renders again whenever the chart's version or the repository's revision changes",
    ),
    (
        "verify",
        "Tether verifies a chart's Helm provenance (source.verify.mode: provenance) with keys \
         inline; cosign signatures are not checked",
    ),
    (
        "ignoreMissingValuesFiles",
        "Tether fails the render when a values file is missing",
    ),
];

const REPOSITORY_REASONS: &[(&str, &str)] = &[
    ("timeout", "Tether bounds each fetch itself"),
    (
        "passCredentials",
        "Tether sends a Helm repository's credentials to that repository only",
    ),
    (
        "provider",
        "Tether reads credentials from a Secret (source.secretRef), not a cloud identity",
    ),
    (
        "certSecretRef",
        "put tls.crt, tls.key and caCert in the Secret named by source.secretRef",
    ),
    ("suspend", "Tether has no suspended repositories"),
    (
        "accessFrom",
        "Tether reads credentials from the Application's namespace only",
    ),
];

/// Converts the Flux HelmRelease of `input`.
pub fn helm_release(
    input: &Input,
    sources: &Sources<'_>,
    options: &Options,
) -> (Option<Value>, Vec<Finding>) {
    let mut report = Report::of(input);
    let name = input.name();
    let from_namespace = input.namespace().unwrap_or("default");
    let namespace = super::target_namespace(options, Some(from_namespace));
    let mut spec = Fields::spec(input);
    let target = spec.text("targetNamespace");
    let release_name = spec.text("releaseName").unwrap_or_else(|| match &target {
        Some(target) => format!("{target}-{name}"),
        None => name.to_string(),
    });
    let helm_namespace = target.clone().unwrap_or_else(|| from_namespace.to_string());

    let mut chart = spec.nested("chart");
    let chart_spec = chart.nested("spec");
    report.leftovers(chart, &[], "Tether has no such chart field");
    let chart_ref = spec.take("chartRef");
    let (source, findings, value_files) = if let Some(reference) = chart_ref {
        match chart_ref_source(&reference, sources, from_namespace) {
            Ok(made) => (made.0, made.1, Vec::new()),
            Err(why) => {
                report.not_mapped("spec.chartRef", why);
                return (None, report.findings);
            }
        }
    } else {
        match template_source(chart_spec, sources, from_namespace, options, &mut report) {
            Some(made) => made,
            None => return (None, report.findings),
        }
    };
    let mut source = source;
    let mut helm = Map::new();
    helm.insert("releaseName".into(), json!(release_name));
    helm.insert("namespace".into(), json!(helm_namespace));
    if !value_files.is_empty() {
        helm.insert("valueFiles".into(), Value::Array(value_files));
    }
    if let Some(values) = spec.take("values") {
        match serde_saphyr::to_string(&values) {
            Ok(text) => {
                helm.insert("values".into(), json!(text));
            }
            Err(error) => {
                report.not_mapped("spec.values", format!("cannot be written as YAML: {error}"))
            }
        }
    }
    source["renderer"] = json!({ "helm": helm });

    let mut out = Map::new();
    out.insert("source".into(), source);
    out.insert("destination".into(), json!({ "namespace": helm_namespace }));
    if let Some(account) = spec.text("serviceAccountName") {
        out.insert("serviceAccountName".into(), json!(account));
    }
    let depends = depends_on(spec.list("dependsOn"), options, from_namespace);
    if !depends.is_empty() {
        out.insert("dependsOn".into(), Value::Array(depends));
    }
    let suspend = spec.flag("suspend") == Some(true);
    out.insert(
        "syncPolicy".into(),
        json!({
            "automated": !suspend,
            "selfHeal": !suspend,
            // Helm deletes what a new chart version no longer renders.
            "prune": true,
            "adoptExisting": true,
        }),
    );
    report.leftovers(spec, RELEASE_REASONS, "Tether has no such field");
    flux_application(input, &namespace, out, report, findings)
}

/// The source a chart template (`spec.chart.spec`) names, with its chart
/// and version, and its value files as paths from the chart's directory;
/// `None`, said in `report`, when it cannot be imported.
fn template_source(
    mut chart_spec: Fields,
    sources: &Sources<'_>,
    from_namespace: &str,
    options: &Options,
    report: &mut Report,
) -> Option<(Value, Vec<Finding>, Vec<Value>)> {
    let reference = chart_spec.take("sourceRef").unwrap_or(Value::Null);
    let chart_name = chart_spec.text("chart").unwrap_or_default();
    let version = chart_spec
        .text("version")
        .filter(|v| v != "*" && !v.is_empty());
    let mut files = chart_spec.list("valuesFiles");
    if let Some(file) = chart_spec.take("valuesFile") {
        files.insert(0, file);
    }
    report.leftovers(
        std::mem::take(&mut chart_spec),
        CHART_REASONS,
        "Tether has no such chart field",
    );
    let found = match sources.find(&reference, from_namespace) {
        Ok(found) => found,
        Err(why) => {
            report.not_mapped(
                "spec.chart.spec.sourceRef",
                format!("{why}: nothing imported; import it together"),
            );
            return None;
        }
    };
    let (source, findings) = match reference["kind"].as_str() {
        Some("HelmRepository") => {
            let (mut source, findings) = helm_repository(found, options);
            source["chart"] = json!(chart_name);
            if let Some(version) = version {
                source["version"] = json!(version);
            }
            (source, findings)
        }
        Some("GitRepository") => {
            let (mut source, findings) = git_source(found, options);
            if super::flux::take_suspended(&mut source) {
                report.note(
                    "spec.chart.spec.sourceRef",
                    "its GitRepository is suspended",
                );
            }
            let path = chart_name.trim_start_matches("./").trim_matches('/');
            if !path.is_empty() && path != "." {
                source["path"] = json!(path);
            }
            // Flux names them from the repository's root, Tether from
            // the chart's directory.
            for file in files.iter_mut() {
                if let Some(text) = file.as_str() {
                    *file = json!(relative_to(path, text));
                }
            }
            (source, findings)
        }
        _ => {
            report.not_mapped(
                "spec.chart.spec.sourceRef",
                "Tether reads charts from Helm repositories, OCI registries and Git only",
            );
            return None;
        }
    };
    Some((source, findings, files))
}

/// A HelmRepository as a chart source (the caller adds the chart).
fn helm_repository(input: &Input, options: &Options) -> (Value, Vec<Finding>) {
    let mut report = Report::of(input);
    let mut spec = Fields::spec(input);
    let mut out = Map::new();
    let url = spec.text("url").unwrap_or_default();
    let oci = spec.text("type").as_deref() == Some("oci");
    if oci && !url.starts_with("oci://") {
        out.insert("repoURL".into(), json!(format!("oci://{url}")));
    } else {
        out.insert("repoURL".into(), json!(url));
    }
    if spec.flag("insecure") == Some(true) {
        out.insert("insecure".into(), json!(true));
    }
    secret(&mut spec, &mut out, &mut report, input, options);
    if let Some(every) = spec.text("interval").and_then(|i| interval(&i)) {
        out.insert("interval".into(), json!(every));
    }
    report.leftovers(
        spec,
        REPOSITORY_REASONS,
        "Tether's source has no such field",
    );
    (Value::Object(out), report.findings)
}

/// `chartRef` to an OCIRepository holding a chart: the registry path and
/// the chart, its last component.
fn chart_ref_source(
    reference: &Value,
    sources: &Sources<'_>,
    namespace: &str,
) -> Result<(Value, Vec<Finding>), String> {
    if reference["kind"] != "OCIRepository" {
        return Err(
            "Tether reads a chartRef to an OCIRepository only; name the chart and its \
                    HelmRepository in chart.spec"
                .to_string(),
        );
    }
    let found = sources.find(reference, namespace)?;
    let mut report = Report::of(found);
    let mut spec = Fields::spec(found);
    let url = spec.text("url").unwrap_or_default();
    let (registry, chart) = url.rsplit_once('/').unwrap_or((&url, ""));
    let mut out = Map::new();
    out.insert("repoURL".into(), json!(registry));
    out.insert("chart".into(), json!(chart));
    let mut reference = spec.nested("ref");
    if let Some(version) = oci_version(&mut reference) {
        out.insert("version".into(), json!(version));
    }
    report.leftovers(reference, &[], "Tether has no such reference");
    if let Some(every) = spec.text("interval").and_then(|i| interval(&i)) {
        out.insert("interval".into(), json!(every));
    }
    if let Some(name) = spec.nested("secretRef").text("name") {
        out.insert("secretRef".into(), json!({ "name": name }));
    }
    report.leftovers(
        spec,
        REPOSITORY_REASONS,
        "Tether's source has no such field",
    );
    Ok((Value::Object(out), report.findings))
}

/// `file` (relative to the repository's root) relative to `dir`.
fn relative_to(dir: &str, file: &str) -> String {
    let file = file.trim_start_matches("./");
    let dir: Vec<&str> = dir
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let parts: Vec<&str> = file.split('/').collect();
    let common = dir.iter().zip(&parts).take_while(|(a, b)| a == b).count();
    let mut out: Vec<&str> = vec![".."; dir.len() - common];
    out.extend(&parts[common..]);
    out.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_files_from_the_repository_root_are_made_relative_to_the_chart() {
        assert_eq!(
            relative_to("charts/podinfo", "./charts/podinfo/values-prod.yaml"),
            "values-prod.yaml"
        );
        assert_eq!(
            relative_to("charts/podinfo", "env/prod.yaml"),
            "../../env/prod.yaml"
        );
    }
}
