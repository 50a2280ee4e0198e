//! One Argo CD source (`spec.source` or an entry of `spec.sources`) as a
//! Tether source: repository, revision, path, and the renderer with its
//! options — Helm values, directory globs, Jsonnet variables. Kustomize
//! options and config management plugins have no counterpart.

use serde_json::{Map, Value, json};

use super::report::{Fields, Report};
use super::values;
use super::{Detect, Place, Renderer};

/// What every source of one app needs to know about the app.
pub(crate) struct SourceContext<'a> {
    /// Argo CD names a Helm release after the app.
    pub app_name: &'a str,
    /// Argo CD passes it to `helm template --namespace`.
    pub destination_namespace: &'a str,
}

const HELM_REASONS: &[(&str, &str)] = &[
    (
        "fileParameters",
        "Tether reads values from files in the repository: list the file in valueFiles",
    ),
    (
        "passCredentials",
        "Tether sends a Helm repository's credentials to that repository only",
    ),
    (
        "ignoreMissingValueFiles",
        "Tether fails the render when a values file is missing",
    ),
    (
        "skipCrds",
        "Tether applies the chart's CRDs (helm template --include-crds)",
    ),
    (
        "skipSchemaValidation",
        "Tether always validates values against the chart's schema",
    ),
    ("skipTests", "Tether leaves out the chart's test hooks"),
    ("version", "Tether renders with Helm 3"),
    (
        "apiVersions",
        "Tether passes the destination cluster's own API versions",
    ),
    (
        "kubeVersion",
        "Tether passes the destination cluster's own version",
    ),
];

const KUSTOMIZE_WHY: &str =
    "Tether's kustomize renderer takes no options: write it in the kustomization.yaml at the path";

const DIRECTORY_REASONS: &[(&str, &str)] = &[];

/// Converts the source in `fields`; none if it has no repository, or if
/// it names a config management plugin.
pub(crate) fn source(
    fields: &mut Fields,
    context: &SourceContext<'_>,
    report: &mut Report<'_>,
    detect: &mut Detect<'_>,
) -> Option<Value> {
    let at = fields.path.clone();
    let Some(mut written) = Written::read(fields) else {
        report.not_mapped(&at, "a source without repoURL");
        return None;
    };
    if written.chart.is_none() && written.plugin.present {
        report.not_mapped(
            &written.plugin.path,
            "Tether runs no config management plugins, and applying the files as they \
             are would apply the plugin's input: the app is not imported; render to \
             plain YAML in CI, or use a renderer Tether has",
        );
        return None;
    }
    let mut out = Map::new();
    if let Some(name) = &written.name {
        out.insert("name".into(), json!(name));
    }
    let renderer = match written.chart.clone() {
        Some(chart) => Some(chart_source(
            &mut written,
            &chart,
            &mut out,
            context,
            report,
        )),
        None => git_source(&mut written, &mut out, context, report, detect),
    };
    if let Some(renderer) = renderer.filter(|r| r.get("directory") != Some(&json!({}))) {
        out.insert("renderer".into(), renderer);
    }
    report.leftovers(
        written.helm,
        HELM_REASONS,
        "Tether's helm renderer has no such option",
    );
    report.leftovers(written.kustomize, &[], KUSTOMIZE_WHY);
    report.leftovers(
        written.directory,
        DIRECTORY_REASONS,
        "Tether's directory renderer has no such option",
    );
    report.leftovers(
        std::mem::take(fields),
        &[],
        "Tether's source has no such field",
    );
    Some(Value::Object(out))
}

/// What one Argo CD source says, read once; the renderer options are
/// taken out of the source's fields, to be reported on when left over.
struct Written {
    /// Where the source is (`spec.source`).
    at: String,
    repo_url: String,
    /// Its revision; none for the remote's HEAD.
    revision: Option<String>,
    chart: Option<String>,
    /// Its path, without `./` and slashes; none for the root.
    path: Option<String>,
    /// The name other sources' value files refer to it by (`ref`).
    name: Option<String>,
    helm: Fields,
    kustomize: Fields,
    directory: Fields,
    plugin: Fields,
}

impl Written {
    /// None without a repoURL.
    fn read(fields: &mut Fields) -> Option<Written> {
        let repo_url = fields.text("repoURL")?;
        Some(Written {
            at: fields.path.clone(),
            repo_url,
            revision: fields
                .text("targetRevision")
                .filter(|r| !r.is_empty() && r != "HEAD"),
            chart: fields.text("chart"),
            path: fields
                .text("path")
                .map(|p| p.trim_start_matches("./").trim_matches('/').to_string())
                .filter(|p| !p.is_empty() && p != "."),
            name: fields.text("ref"),
            helm: fields.nested("helm"),
            kustomize: fields.nested("kustomize"),
            directory: fields.nested("directory"),
            plugin: fields.nested("plugin"),
        })
    }
}

/// A chart from a Helm or OCI repository: its place in `out`, and its
/// helm renderer.
fn chart_source(
    written: &mut Written,
    chart: &str,
    out: &mut Map<String, Value>,
    context: &SourceContext<'_>,
    report: &mut Report<'_>,
) -> Value {
    let repo_url = &written.repo_url;
    // Argo CD writes an OCI chart repository without its scheme.
    let url = match repo_url.contains("://") {
        true => repo_url.clone(),
        false => {
            report.note(
                &format!("{}.repoURL", written.at),
                format!("an OCI registry without a scheme: read as oci://{repo_url}"),
            );
            format!("oci://{repo_url}")
        }
    };
    out.insert("repoURL".into(), json!(url));
    out.insert("chart".into(), json!(chart));
    if let Some(version) = written.revision.as_ref().filter(|v| *v != "*") {
        out.insert("version".into(), json!(version));
    }
    helm_renderer(&mut written.helm, context, report)
}

/// A path in a Git repository: its place in `out`, and the renderer its
/// options name, or the one Argo CD would detect there.
fn git_source(
    written: &mut Written,
    out: &mut Map<String, Value>,
    context: &SourceContext<'_>,
    report: &mut Report<'_>,
    detect: &mut Detect<'_>,
) -> Option<Value> {
    out.insert("repoURL".into(), json!(written.repo_url));
    if let Some(revision) = &written.revision {
        out.insert("revision".into(), json!(revision));
    }
    if let Some(path) = &written.path {
        out.insert("path".into(), json!(path));
    }
    // Where Argo CD would look to pick a renderer.
    let place = Place {
        repo_url: written.repo_url.clone(),
        revision: written.revision.clone().unwrap_or_default(),
        path: written.path.clone().unwrap_or_default(),
        secret: None,
    };
    let at = &written.at;
    if written.helm.present {
        Some(helm_renderer(&mut written.helm, context, report))
    } else if written.kustomize.present {
        Some(json!({"kustomize": {}}))
    } else if written.directory.present {
        let jsonnet_main = written
            .directory
            .get("jsonnet")
            .is_some()
            .then(|| jsonnet_main(&place, report, at, detect));
        Some(directory_renderer(
            &mut written.directory,
            jsonnet_main,
            report,
        ))
    } else if written.name.is_some() && written.path.is_none() {
        // Only lends its files to `$NAME/…` value files.
        None
    } else {
        detected(&place, context, report, at, detect)
    }
}

/// The renderer Argo CD would pick for a Git directory, which it decides
/// from the files there: asked of `detect`.
fn detected(
    place: &Place,
    context: &SourceContext<'_>,
    report: &mut Report<'_>,
    at: &str,
    detect: &mut Detect<'_>,
) -> Option<Value> {
    match detect(place) {
        Ok(Renderer::Helm) => Some(json!({"helm": {
            "releaseName": context.app_name,
            "namespace": context.destination_namespace,
        }})),
        Ok(renderer) => renderer.options(),
        Err(error) => {
            report.note(
                &format!("{at}.path"),
                format!(
                    "the renderer could not be detected ({error}): directory assumed; set \
                     source.renderer if Argo CD renders it otherwise"
                ),
            );
            None
        }
    }
}

/// The Jsonnet entry file at the app's path: Argo CD evaluates every
/// `*.jsonnet` file there, Tether one entry file.
fn jsonnet_main(
    place: &Place,
    report: &mut Report<'_>,
    at: &str,
    detect: &mut Detect<'_>,
) -> String {
    match detect(place) {
        Ok(Renderer::Jsonnet { main }) => main,
        Ok(_) | Err(_) => {
            report.note(
                &format!("{at}.directory.jsonnet"),
                "Argo CD evaluates every *.jsonnet file of the path, Tether one entry file \
                 (main.jsonnet): set renderer.jsonnet.main if it is another",
            );
            String::new()
        }
    }
}

/// `renderer.helm`, from Argo CD's `helm` options: the release is named
/// after the app and placed in the destination namespace, as Argo CD does.
fn helm_renderer(helm: &mut Fields, context: &SourceContext<'_>, report: &mut Report<'_>) -> Value {
    let mut out = Map::new();
    let release = helm
        .text("releaseName")
        .unwrap_or_else(|| context.app_name.to_string());
    out.insert("releaseName".into(), json!(release));
    let namespace = helm
        .text("namespace")
        .unwrap_or_else(|| context.destination_namespace.to_string());
    out.insert("namespace".into(), json!(namespace));
    let files: Vec<Value> = helm.list("valueFiles");
    if !files.is_empty() {
        out.insert("valueFiles".into(), Value::Array(files));
    }
    let values_at = helm.at("values");
    let text = helm.take("values");
    let object = helm.take("valuesObject");
    let parameters_at = helm.at("parameters");
    let parameters = helm.list("parameters");
    if let Some(values) = values::merge(text, object, &parameters, |index, why| {
        report.not_mapped(&format!("{parameters_at}[{index}]"), why)
    }) {
        match values {
            Ok(values) => {
                out.insert("values".into(), json!(values));
            }
            Err(why) => report.not_mapped(&values_at, why),
        }
    }
    json!({ "helm": out })
}

/// `renderer.directory` (or `jsonnet`, for a directory with Jsonnet
/// options), from Argo CD's `directory` options.
fn directory_renderer(
    directory: &mut Fields,
    jsonnet_main: Option<String>,
    report: &mut Report<'_>,
) -> Value {
    let mut jsonnet = directory.nested("jsonnet");
    if jsonnet.present {
        let mut out = Map::new();
        if let Some(main) = jsonnet_main.filter(|m| !m.is_empty() && m != "main.jsonnet") {
            out.insert("main".into(), json!(main));
        }
        for (key, strings, code) in [
            ("extVars", "extVars", "extCode"),
            ("tlas", "tlas", "tlaCode"),
        ] {
            let mut as_strings = Map::new();
            let mut as_code = Map::new();
            for item in jsonnet.list(key) {
                let name = item["name"].as_str().unwrap_or_default().to_string();
                let value = item["value"].as_str().unwrap_or_default().to_string();
                match item["code"].as_bool() == Some(true) {
                    true => as_code.insert(name, json!(value)),
                    false => as_strings.insert(name, json!(value)),
                };
            }
            if !as_strings.is_empty() {
                out.insert(strings.into(), Value::Object(as_strings));
            }
            if !as_code.is_empty() {
                out.insert(code.into(), Value::Object(as_code));
            }
        }
        report.leftovers(
            jsonnet,
            &[(
                "libs",
                "Tether resolves Jsonnet imports inside the repository only: vendor the library",
            )],
            "Tether's jsonnet renderer has no such option",
        );
        for key in ["include", "exclude", "recurse"] {
            directory.drop(key);
        }
        return json!({ "jsonnet": out });
    }
    let recurse_at = directory.at("recurse");
    if directory.flag("recurse") != Some(true) {
        report.note(
            &recurse_at,
            "Argo CD reads only the top directory unless recurse is true; Tether reads its \
             subdirectories too (exclude them with renderer.directory.exclude)",
        );
    }
    let mut out = Map::new();
    for key in ["include", "exclude"] {
        if let Some(globs) = directory.text(key).filter(|g| !g.is_empty()) {
            out.insert(key.into(), json!(expand_braces(&globs)));
        }
    }
    json!({ "directory": out })
}

/// Argo CD's one glob with `{a,b}` alternatives as Tether's list of globs.
fn expand_braces(glob: &str) -> Vec<String> {
    match (glob.find('{'), glob.rfind('}')) {
        (Some(open), Some(close)) if open < close => {
            let (head, tail) = (&glob[..open], &glob[close + 1..]);
            glob[open + 1..close]
                .split(',')
                .map(|middle| format!("{head}{}{tail}", middle.trim()))
                .collect()
        }
        _ => vec![glob.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brace_alternatives_become_a_list_of_globs() {
        assert_eq!(expand_braces("{a.yaml,b/*.yaml}"), ["a.yaml", "b/*.yaml"]);
        assert_eq!(expand_braces("*.yaml"), ["*.yaml"]);
    }
}
