//! `tether import`: Argo CD and Flux objects turned into Tether objects,
//! with a report of every field that could not be carried over and why.
//!
//! Values in, values out: [`read`] splits a file into documents (keeping
//! each one's line), [`import`] converts the documents it recognises —
//! Argo CD `Application`, `ApplicationSet` (list generators) and
//! `AppProject`; Flux `Kustomization` and `HelmRelease` with the
//! `GitRepository`, `OCIRepository` and `HelmRepository` they name — into
//! Tether `Application`s and `Project`s, and every other document is
//! skipped. The one question a conversion cannot answer from the objects
//! alone, which renderer a Git directory needs (Argo CD and Flux decide
//! from the repository's files), is asked through a [`Detect`] callback
//! the caller answers by reading the repository.
//!
//! Imported Applications take over what Argo CD or Flux applied in place:
//! `syncPolicy.adoptExisting` is set, so objects that exist already are
//! adopted (server-side apply with force moves their fields from
//! `argocd-controller` or `kustomize-controller` to `tether`) instead of
//! refusing the commit, and nothing is deleted or recreated.

mod appset;
mod argocd;
mod argocd_source;
mod flux;
mod flux_helm;
mod project;
pub mod report;
pub mod takeover;
mod values;

use serde_json::{Map, Value, json};

pub use report::{Finding, Verdict};
pub use values::overlay;

/// Annotation on every imported object naming what it was imported from
/// (`argocd Application argocd/guestbook`).
pub const IMPORTED_FROM_ANNOTATION: &str = "tether.dev/imported-from";

/// One YAML document of an input file.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub file: String,
    /// The document's first line in the file, from 1.
    pub line: usize,
    /// The document's text, for finding the line of a field.
    pub text: String,
    pub object: Value,
}

impl Input {
    /// The object's `metadata.name`, empty when it has none.
    fn name(&self) -> &str {
        self.object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The object's `metadata.namespace`, if it has one.
    fn namespace(&self) -> Option<&str> {
        self.object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
    }
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct ReadError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// The documents of the YAML file `file` (its `text`), empty and
/// comment-only ones left out.
pub fn read(file: &str, text: &str) -> Result<Vec<Input>, ReadError> {
    let mut inputs = Vec::new();
    let mut start = 0;
    let mut lines: Vec<&str> = Vec::new();
    let all: Vec<&str> = text.lines().collect();
    for (index, line) in all.iter().enumerate() {
        if line.starts_with("---") {
            push_document(file, start, &lines, &mut inputs)?;
            lines.clear();
            start = index + 1;
        } else {
            lines.push(line);
        }
    }
    push_document(file, start, &lines, &mut inputs)?;
    Ok(inputs)
}

fn push_document(
    file: &str,
    start: usize,
    lines: &[&str],
    inputs: &mut Vec<Input>,
) -> Result<(), ReadError> {
    let text = lines.join("\n");
    let blank = lines.iter().all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#')
    });
    if blank {
        return Ok(());
    }
    let object: Value = serde_saphyr::from_str(&text).map_err(|error| ReadError {
        file: file.to_string(),
        line: start + 1,
        message: error.to_string(),
    })?;
    if !object.is_object() {
        return Ok(());
    }
    inputs.push(Input {
        file: file.to_string(),
        line: start + 1,
        text,
        object,
    });
    Ok(())
}

/// A Git directory whose renderer must be detected from its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub repo_url: String,
    pub revision: String,
    pub path: String,
    /// The Secret the repository is read with, if any.
    pub secret: Option<String>,
}

/// Answers which renderer ([`Renderer`]) the files at a [`Place`] need,
/// or why that could not be found out.
pub type Detect<'a> = dyn FnMut(&Place) -> Result<Renderer, String> + 'a;

/// The renderers a detection can name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renderer {
    Directory,
    Kustomize,
    Helm,
    /// Jsonnet, with its entry file (empty: `main.jsonnet`).
    Jsonnet {
        main: String,
    },
}

impl Renderer {
    /// The key of `source.renderer`.
    pub fn name(&self) -> &'static str {
        match self {
            Renderer::Directory => "directory",
            Renderer::Kustomize => "kustomize",
            Renderer::Helm => "helm",
            Renderer::Jsonnet { .. } => "jsonnet",
        }
    }

    /// `source.renderer` with default options (none for a directory,
    /// Tether's default).
    fn options(&self) -> Option<serde_json::Value> {
        match self {
            Renderer::Directory => None,
            Renderer::Jsonnet { main } if !main.is_empty() && main != "main.jsonnet" => {
                Some(json!({"jsonnet": {"main": main}}))
            }
            other => Some(json!({ other.name(): {} })),
        }
    }
}

/// How to import.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// The namespace imported Applications go to (default: the namespace
    /// of the object each comes from).
    pub namespace: Option<String>,
}

/// What an import made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Imported {
    /// Tether `Project`s first, then `Application`s, in input order.
    pub objects: Vec<Value>,
    pub findings: Vec<Finding>,
    /// Documents that are neither Argo CD's nor Flux's (ordinary objects
    /// of the repository), left alone.
    pub skipped: usize,
}

/// Converts every Argo CD and Flux object of `inputs`.
pub fn import(inputs: &[Input], options: &Options, detect: &mut Detect<'_>) -> Imported {
    let mut imported = Imported::default();
    let mut projects = Vec::new();
    let mut apps = Vec::new();
    let sources = flux::Sources::index(inputs);
    let patches = patch_files(inputs);
    for input in inputs {
        if patches.contains(&input.file) {
            imported.skipped += 1;
            continue;
        }
        let kind = input.object["kind"].as_str().unwrap_or_default();
        let group = group_of(&input.object);
        let made = match (group, kind) {
            ("argoproj.io", "Application") => {
                let (made, findings) = argocd::application(input, options, detect);
                imported.findings.extend(findings);
                made.map(|app| vec![app])
            }
            ("argoproj.io", "ApplicationSet") => {
                let (made, findings) = appset::application_set(input, options, detect);
                imported.findings.extend(findings);
                Some(made)
            }
            ("argoproj.io", "AppProject") => {
                let (made, findings) = project::project(input, options);
                imported.findings.extend(findings);
                projects.push(made);
                continue;
            }
            ("kustomize.toolkit.fluxcd.io", "Kustomization") => {
                let (made, findings) = flux::kustomization(input, &sources, options, detect);
                imported.findings.extend(findings);
                made.map(|app| vec![app])
            }
            ("helm.toolkit.fluxcd.io", "HelmRelease") => {
                let (made, findings) = flux_helm::helm_release(input, &sources, options);
                imported.findings.extend(findings);
                made.map(|app| vec![app])
            }
            ("source.toolkit.fluxcd.io", "GitRepository" | "OCIRepository" | "HelmRepository") => {
                // Read through the objects that name them.
                continue;
            }
            (group, _) if group == "argoproj.io" || group.ends_with(".toolkit.fluxcd.io") => {
                let mut report = report::Report::of(input);
                report.not_mapped(
                    "kind",
                    format!(
                        "Tether has no counterpart of {kind}; only Argo CD Application, \
                         ApplicationSet, AppProject and Flux Kustomization, HelmRelease (with \
                         their GitRepository, OCIRepository, HelmRepository) are imported"
                    ),
                );
                imported.findings.extend(report.findings);
                continue;
            }
            _ => {
                imported.skipped += 1;
                continue;
            }
        };
        apps.extend(made.unwrap_or_default().into_iter().map(|app| (input, app)));
    }
    let apps = unique_names(apps, &mut imported.findings);
    imported.objects = projects.into_iter().chain(apps).collect();
    // A source read for several apps is reported once.
    let mut seen = std::collections::HashSet::new();
    imported
        .findings
        .retain(|finding| seen.insert(finding.to_string()));
    imported
}

/// `apps` with every name unique in its namespace: two objects imported
/// into one namespace (a Kustomization and a HelmRelease of the same name,
/// or `-n`) would otherwise be one Application, the second overwriting the
/// first. A later one is renamed `NAME-2` (`-3`, …), and that is a finding.
fn unique_names(apps: Vec<(&Input, Value)>, findings: &mut Vec<Finding>) -> Vec<Value> {
    let mut taken = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(apps.len());
    for (input, mut app) in apps {
        let namespace = app["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = app["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut unique = name.clone();
        let mut number = 1;
        while !taken.insert((namespace.clone(), unique.clone())) {
            number += 1;
            unique = format!("{name}-{number}");
        }
        if unique != name {
            let mut report = report::Report::of(input);
            report.note(
                "metadata.name",
                format!(
                    "another imported Application is {namespace}/{name}: this one is named \
                     {unique}; check the dependsOn that name it"
                ),
            );
            findings.extend(report.findings);
            app["metadata"]["name"] = json!(unique);
        }
        out.push(app);
    }
    out
}

/// The files kustomizations of the input name as patches: partial
/// objects (a HelmRelease with only its values), not objects to import.
fn patch_files(inputs: &[Input]) -> std::collections::HashSet<String> {
    let mut files = std::collections::HashSet::new();
    for input in inputs {
        if group_of(&input.object) != "kustomize.config.k8s.io" {
            continue;
        }
        let dir = match input.file.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/"),
            None => String::new(),
        };
        let object = &input.object;
        let named = object["patches"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|patch| patch["path"].as_str())
            .chain(
                object["patchesStrategicMerge"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str),
            );
        for path in named {
            files.insert(format!("{dir}{}", path.trim_start_matches("./")));
        }
    }
    files
}

/// The API group of an object's `apiVersion` (empty for the core group).
fn group_of(object: &Value) -> &str {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    match api_version.split_once('/') {
        Some((group, _)) => group,
        None => "",
    }
}

/// `Kind namespace/name` (`Kind name` for a cluster-scoped one).
fn object_name(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("?");
    let name = object.pointer("/metadata/name").and_then(Value::as_str);
    match object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
    {
        Some(namespace) => format!("{kind} {namespace}/{}", name.unwrap_or("?")),
        None => format!("{kind} {}", name.unwrap_or("?")),
    }
}

/// A Tether Application named `name` in `namespace` with `spec`, marked
/// as imported from `from`; `labels` are carried over.
fn application(
    name: &str,
    namespace: &str,
    from: &str,
    labels: Option<Value>,
    spec: Value,
) -> Value {
    let mut metadata = Map::new();
    metadata.insert("name".into(), json!(name));
    metadata.insert("namespace".into(), json!(namespace));
    // The marks of the Argo CD app or Flux Kustomization that applied the
    // object read would say it still manages the Application.
    let labels: Map<String, Value> = labels
        .and_then(|labels| labels.as_object().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter(|(key, _)| !takeover::TRACKING_MARKS.contains(&key.as_str()))
        .collect();
    if !labels.is_empty() {
        metadata.insert("labels".into(), Value::Object(labels));
    }
    metadata.insert(
        "annotations".into(),
        json!({ IMPORTED_FROM_ANNOTATION: from }),
    );
    json!({
        "apiVersion": "tether.dev/v1alpha1",
        "kind": "Application",
        "metadata": metadata,
        "spec": spec,
    })
}

/// The namespace an Application imported from an object in `namespace`
/// goes to.
fn target_namespace(options: &Options, namespace: Option<&str>) -> String {
    options
        .namespace
        .clone()
        .or_else(|| namespace.map(str::to_string))
        .unwrap_or_else(|| "default".to_string())
}

/// A Go-style duration (`1m30s`, `500ms`, `2h`) in whole seconds, rounded
/// up; none if it does not parse.
fn seconds(text: &str) -> Option<u64> {
    let mut total = 0f64;
    let mut number = String::new();
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        number.clear();
        number.push_str(&rest[..digits]);
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let value: f64 = number.parse().ok()?;
        total += value
            * match unit {
                "h" => 3600.0,
                "m" => 60.0,
                "s" => 1.0,
                "ms" => 0.001,
                _ => return None,
            };
    }
    Some(total.ceil() as u64)
}

/// A Flux or Argo CD interval as `source.interval` takes it (`90s`, `5m`).
fn interval(text: &str) -> Option<String> {
    let seconds = seconds(text)?.max(1);
    Some(match seconds {
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    })
}

/// The `key` text of each entry of the list at `pointer` in `object`.
fn entry_texts<'a>(
    object: &'a Value,
    pointer: &str,
    key: &'a str,
) -> impl Iterator<Item = &'a str> + 'a {
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(move |entry| entry[key].as_str())
}

/// The namespaces of `namespaces` besides `namespace` (and the empty one
/// of cluster-scoped objects), sorted, each once.
fn other_namespaces<'a>(namespaces: impl Iterator<Item = &'a str>, namespace: &str) -> Vec<String> {
    let mut others: Vec<String> = namespaces
        .filter(|ns| !ns.is_empty() && *ns != namespace)
        .map(str::to_string)
        .collect();
    others.sort();
    others.dedup();
    others
}

/// The host of a URL, as a cluster name (`https://10.0.0.1:6443` →
/// `10.0.0.1`).
fn host_name(server: &str) -> String {
    let rest = server.split_once("://").map_or(server, |(_, rest)| rest);
    let host = rest.split(['/', ':']).next().unwrap_or(rest);
    host.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_objects_imported_into_one_namespace_under_one_name_stay_two_applications() {
        let text = "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: web, namespace: a}\nspec:\n  source: {repoURL: https://git.example/web.git, path: web}\n  destination: {name: in-cluster, namespace: web}\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: web, namespace: b}\nspec:\n  source: {repoURL: https://git.example/web.git, path: web}\n  destination: {name: in-cluster, namespace: web}\n";
        let inputs = read("apps.yaml", text).unwrap();
        let options = Options {
            namespace: Some("tether-system".into()),
        };
        let imported = import(&inputs, &options, &mut |_: &Place| Ok(Renderer::Directory));
        let names: Vec<&str> = imported
            .objects
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["web", "web-2"]);
        assert_eq!(
            imported.findings[0].to_string(),
            "apps.yaml:10: Application b/web: field metadata.name: note: another imported \
             Application is tether-system/web: this one is named web-2; check the dependsOn that \
             name it"
        );
    }

    #[test]
    fn go_durations_become_source_intervals() {
        assert_eq!(interval("1m0s").as_deref(), Some("1m"));
        assert_eq!(interval("10m").as_deref(), Some("10m"));
        assert_eq!(interval("90s").as_deref(), Some("90s"));
        assert_eq!(interval("1h").as_deref(), Some("1h"));
        assert_eq!(interval("500ms").as_deref(), Some("1s"));
        assert_eq!(interval("soon"), None);
    }

    #[test]
    fn documents_keep_their_first_line_and_comment_only_ones_are_skipped() {
        let text = "# header\n---\nkind: A\n---\n# only a comment\n---\nkind: B\nx: 1\n";
        let inputs = read("f.yaml", text).unwrap();
        let lines: Vec<usize> = inputs.iter().map(|i| i.line).collect();
        assert_eq!(lines, [3, 7]);
    }
}
