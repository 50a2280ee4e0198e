//! Flux `Kustomization` (with the `GitRepository` or `OCIRepository` it
//! names) → Tether `Application`. Flux runs `kustomize build` on the path,
//! generating a kustomization when there is none; Tether reads the same
//! directory with the renderer its files call for.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::report::{Fields, Finding, Report};
use super::{
    Detect, Input, Options, Place, Renderer, application, entry_texts, interval, other_namespaces,
};
use crate::verify::VerifyMode;

const KUSTOMIZE_OPTION: &str =
    "Tether's kustomize renderer takes no options: write it in a kustomization.yaml at the path";

const KUSTOMIZATION_REASONS: &[(&str, &str)] = &[
    (
        "interval",
        "Tether watches the objects it applies and reverts drift at once; the repository is \
         polled at the GitRepository's interval",
    ),
    (
        "retryInterval",
        "Tether retries a failed sync with exponential back-off (syncPolicy.retry)",
    ),
    ("timeout", "Tether bounds each step itself"),
    (
        "wait",
        "Tether judges the health of every object it applies (status.health)",
    ),
    (
        "healthChecks",
        "Tether judges the health of every object it applies (status.health)",
    ),
    (
        "healthCheckExprs",
        "write them as CEL health rules in spec.health.rules",
    ),
    (
        "force",
        "Tether never deletes and recreates objects; it applies server-side",
    ),
    (
        "postBuild",
        "Tether renders without variable substitution (postBuild.substitute/substituteFrom): \
         write the values into the manifests, or use a kustomize overlay or Helm values",
    ),
    (
        "decryption",
        "Tether does not decrypt SOPS files: keep Secrets out of Git (an external secrets \
         operator) or decrypt before Tether reads them",
    ),
    (
        "kubeConfig",
        "register the cluster with `tether cluster add` and set destination.cluster",
    ),
    ("patches", KUSTOMIZE_OPTION),
    ("images", KUSTOMIZE_OPTION),
    ("components", KUSTOMIZE_OPTION),
    ("namePrefix", KUSTOMIZE_OPTION),
    ("nameSuffix", KUSTOMIZE_OPTION),
    ("commonMetadata", KUSTOMIZE_OPTION),
    (
        "deletionPolicy",
        "deleting a Tether Application leaves its objects unless it has the tether.dev/cascade \
         finalizer",
    ),
];

const GIT_REASONS: &[(&str, &str)] = &[
    ("timeout", "Tether bounds each fetch itself"),
    (
        "ignore",
        "Tether reads only the path; exclude files with renderer.directory.exclude",
    ),
    (
        "include",
        "Tether reads one repository per source; use spec.sources",
    ),
    ("recurseSubmodules", "Tether does not fetch submodules"),
    ("proxySecretRef", "Tether fetches without a proxy"),
    (
        "provider",
        "Tether reads credentials from a Secret (source.secretRef), not a cloud identity",
    ),
    (
        "sparseCheckout",
        "Tether fetches the whole tree of the revision",
    ),
    (
        "suspend",
        "the source is suspended: the imported app has automated syncs off",
    ),
];

/// Flux's sources in the input, by namespace, kind and name.
pub(crate) struct Sources<'a> {
    by_name: HashMap<(String, String, String), &'a Input>,
}

impl<'a> Sources<'a> {
    pub fn index(inputs: &'a [Input]) -> Self {
        let by_name = inputs
            .iter()
            .filter(|input| super::group_of(&input.object) == "source.toolkit.fluxcd.io")
            .map(|input| {
                let object = &input.object;
                let text = |pointer| {
                    object
                        .pointer(pointer)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                (
                    (
                        text("/metadata/namespace"),
                        text("/kind"),
                        text("/metadata/name"),
                    ),
                    input,
                )
            })
            .collect();
        Sources { by_name }
    }

    /// The source `reference` (`{kind, name, namespace}`) names, from an
    /// object in `namespace`.
    pub fn find(&self, reference: &Value, namespace: &str) -> Result<&'a Input, String> {
        let kind = reference["kind"].as_str().unwrap_or_default();
        let name = reference["name"].as_str().unwrap_or_default();
        let namespace = reference["namespace"].as_str().unwrap_or(namespace);
        self.by_name
            .get(&(namespace.to_string(), kind.to_string(), name.to_string()))
            .copied()
            .ok_or_else(|| format!("{kind} {namespace}/{name} is not among the imported files"))
    }
}

/// Converts the Flux Kustomization of `input`.
pub fn kustomization(
    input: &Input,
    sources: &Sources<'_>,
    options: &Options,
    detect: &mut Detect<'_>,
) -> (Option<Value>, Vec<Finding>) {
    let mut report = Report::of(input);
    let object = &input.object;
    let name = input.name();
    let from_namespace = input.namespace().unwrap_or("flux-system");
    let namespace = super::target_namespace(options, Some(from_namespace));
    let mut spec = Fields::spec(input);
    let reference = spec.take("sourceRef").unwrap_or(Value::Null);
    let source_input = match sources.find(&reference, from_namespace) {
        Ok(found) => found,
        Err(why) => {
            report.not_mapped(
                "spec.sourceRef",
                format!("{why}: nothing imported; import it together"),
            );
            return (None, report.findings);
        }
    };
    let (mut source, findings) = match reference["kind"].as_str() {
        Some("GitRepository") => git_source(source_input, options),
        Some("OCIRepository") => oci_source(source_input),
        _ => {
            report.not_mapped("spec.sourceRef", "Tether reads Git and OCI sources only");
            return (None, report.findings);
        }
    };
    let suspended = take_suspended(&mut source);
    if let Some(path) = spec
        .text("path")
        .map(|p| p.trim_start_matches("./").trim_matches('/').to_string())
        .filter(|p| !p.is_empty() && p != ".")
    {
        source["path"] = json!(path);
    }
    if reference["kind"] == "GitRepository" {
        detect_renderer(&mut source, detect, &mut report);
    }
    let mut out = Map::new();
    out.insert("source".into(), source);
    let target = spec.text("targetNamespace");
    let destination = destination(object, target, from_namespace, &mut report);
    out.insert("destination".into(), destination);
    if let Some(account) = spec.text("serviceAccountName") {
        if namespace != from_namespace {
            report.note(
                "spec.serviceAccountName",
                format!("Tether looks for it in the Application's namespace {namespace}"),
            );
        }
        out.insert("serviceAccountName".into(), json!(account));
    }
    let depends = depends_on(spec.list("dependsOn"), options, from_namespace);
    if !depends.is_empty() {
        out.insert("dependsOn".into(), Value::Array(depends));
    }
    let suspend = spec.flag("suspend") == Some(true) || suspended;
    let prune = spec.flag("prune").unwrap_or(false);
    out.insert(
        "syncPolicy".into(),
        json!({
            "automated": !suspend,
            "selfHeal": !suspend,
            "prune": prune,
            "adoptExisting": true,
        }),
    );
    if name == "flux-system" {
        report.note(
            "metadata.name",
            "Flux's own bootstrap Kustomization: it applies Flux's controllers; leave it out \
             once Tether replaces Flux",
        );
    }
    report.leftovers(spec, KUSTOMIZATION_REASONS, "Tether has no such field");
    flux_application(input, &namespace, out, report, findings)
}

/// Sets `source.renderer` from what the files at its Git path need (Flux
/// generates a kustomization where there is none; Tether reads a plain
/// directory), saying in `report` what differs.
fn detect_renderer(source: &mut Value, detect: &mut Detect<'_>, report: &mut Report) {
    let place = Place {
        repo_url: source["repoURL"].as_str().unwrap_or_default().to_string(),
        revision: source["revision"].as_str().unwrap_or_default().to_string(),
        path: source["path"].as_str().unwrap_or_default().to_string(),
        secret: source
            .pointer("/secretRef/name")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    match detect(&place) {
        Ok(Renderer::Directory) => report.note(
            "spec.path",
            "no kustomization.yaml there: Flux generates one; Tether reads every YAML file \
             below the path as plain manifests (a subdirectory's kustomization.yaml is not \
             built: declare it as an Application of its own)",
        ),
        Ok(renderer) => {
            if let Some(options) = renderer.options() {
                source["renderer"] = options;
            }
        }
        Err(error) => report.note(
            "spec.path",
            format!(
                "the renderer could not be detected ({error}): directory assumed; set \
                 source.renderer: {{kustomize: {{}}}} if the path has a kustomization.yaml"
            ),
        ),
    }
}

/// `spec.destination` of a Kustomization applying into `target` (else its
/// own namespace), allowing the other namespaces its inventory names.
fn destination(
    object: &Value,
    target: Option<String>,
    from_namespace: &str,
    report: &mut Report,
) -> Value {
    let mut destination = Map::new();
    if target.is_some() {
        report.note(
            "spec.targetNamespace",
            "Flux moves every namespaced object into it; Tether puts there only the objects \
             that name no namespace",
        );
    }
    let dest_namespace = target.unwrap_or_else(|| from_namespace.to_string());
    destination.insert("namespace".into(), json!(dest_namespace));
    let others = inventory_namespaces(object, &dest_namespace);
    if !others.is_empty() {
        destination.insert("allowNamespaces".into(), json!(others));
    }
    Value::Object(destination)
}

/// The Application imported from Flux object `input` (its name and
/// labels) into `namespace`, with `spec`; with the findings about its
/// sources, `findings`, then `report`'s.
pub(crate) fn flux_application(
    input: &Input,
    namespace: &str,
    spec: Map<String, Value>,
    report: Report<'_>,
    mut findings: Vec<Finding>,
) -> (Option<Value>, Vec<Finding>) {
    let labels = input.object.pointer("/metadata/labels").cloned();
    let app = application(
        input.name(),
        namespace,
        &format!("flux {}", report.object),
        labels,
        Value::Object(spec),
    );
    findings.extend(report.findings);
    (Some(app), findings)
}

/// The namespaces Flux's inventory (in status, read from a cluster) says
/// the Kustomization writes to besides `namespace`.
fn inventory_namespaces(object: &Value, namespace: &str) -> Vec<String> {
    let ids = entry_texts(object, "/status/inventory/entries", "id");
    // `namespace_name_group_kind`; cluster-scoped objects have none.
    other_namespaces(ids.filter_map(|id| id.split('_').next()), namespace)
}

/// `dependsOn` as Tether's: each Kustomization or HelmRelease is imported
/// as the Application of the same name, in the namespace imports go to.
pub(crate) fn depends_on(items: Vec<Value>, options: &Options, from_namespace: &str) -> Vec<Value> {
    items
        .iter()
        .filter_map(|item| {
            let name = item["name"].as_str()?;
            let other = item["namespace"].as_str().unwrap_or(from_namespace);
            Some(
                match options.namespace.is_some() || other == from_namespace {
                    true => json!({ "name": name }),
                    false => json!({ "name": name, "namespace": other }),
                },
            )
        })
        .collect()
}

/// A Tether source holding the repository of a Flux source's `spec.url`.
fn repo_url(spec: &mut Fields) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert(
        "repoURL".into(),
        json!(spec.text("url").unwrap_or_default()),
    );
    out
}

/// The version an OCIRepository's `ref` names: its digest, else its semver
/// range, else its tag.
pub(crate) fn oci_version(reference: &mut Fields) -> Option<String> {
    reference
        .text("digest")
        .or_else(|| reference.text("semver").map(|r| semver_range(&r)))
        .or_else(|| reference.text("tag"))
}

/// A Flux GitRepository as a Tether Git source; `suspended` is set (and
/// taken out by the caller) when the repository is suspended.
pub(crate) fn git_source(input: &Input, options: &Options) -> (Value, Vec<Finding>) {
    let mut report = Report::of(input);
    let mut spec = Fields::spec(input);
    let mut out = repo_url(&mut spec);
    let mut reference = spec.nested("ref");
    let commit = reference.text("commit");
    let name = reference.text("name");
    let semver = reference.text("semver");
    let tag = reference.text("tag");
    let branch = reference.text("branch");
    let revision = match (commit, name, semver, tag, branch) {
        (Some(commit), ..) => commit,
        (None, Some(name), ..) => name,
        (None, None, Some(range), ..) => semver_range(&range),
        (None, None, None, Some(tag), _) => tag,
        (None, None, None, None, Some(branch)) => branch,
        (None, None, None, None, None) => {
            report.note("spec.ref", "none given: Flux's default branch, master");
            "master".to_string()
        }
    };
    out.insert("revision".into(), json!(revision));
    report.leftovers(reference, &[], "Tether has no such reference");
    secret(&mut spec, &mut out, &mut report, input, options);
    if let Some(every) = spec.text("interval").and_then(|i| interval(&i)) {
        out.insert("interval".into(), json!(every));
    }
    let mut verify = spec.nested("verify");
    if let Some(mode) = verify.text("mode") {
        // Flux's modes are HEAD, Tag and TagAndHEAD; an unknown one gets the
        // strictest, so nothing the Flux user meant to check goes unchecked.
        let mode = match mode.to_ascii_lowercase().as_str() {
            "head" => VerifyMode::Head,
            "tag" => VerifyMode::Tag,
            "tagandhead" => VerifyMode::TagAndHead,
            _ => {
                report.note(
                    &verify.at("mode"),
                    format!(
                        "Flux has no mode {mode:?} (HEAD, Tag, TagAndHEAD): the strictest, \
                         tag-and-head, is used"
                    ),
                );
                VerifyMode::TagAndHead
            }
        };
        out.insert("verify".into(), json!({"mode": mode.as_str()}));
        let keys_at = verify.at("secretRef");
        verify.drop("secretRef");
        report.not_mapped(
            &keys_at,
            "Tether takes the trusted keys inline: copy them from the Secret into \
             source.verify.openpgpKeys (or allowedSigners); until then every revision is refused",
        );
    }
    report.leftovers(verify, &[], "Tether has no such verification option");
    if spec.flag("suspend") == Some(true) {
        out.insert("suspended".into(), json!(true));
    }
    report.leftovers(spec, GIT_REASONS, "Tether's source has no such field");
    (Value::Object(out), report.findings)
}

/// A Flux OCIRepository (an artifact of files) as a Tether source.
fn oci_source(input: &Input) -> (Value, Vec<Finding>) {
    let mut report = Report::of(input);
    let mut spec = Fields::spec(input);
    let mut out = repo_url(&mut spec);
    let mut reference = spec.nested("ref");
    if let Some(version) = oci_version(&mut reference) {
        out.insert("version".into(), json!(version));
    }
    report.leftovers(reference, &[], "Tether has no such reference");
    if spec.flag("insecure") == Some(true) {
        out.insert("insecure".into(), json!(true));
    }
    if let Some(name) = spec.nested("secretRef").text("name") {
        out.insert("secretRef".into(), json!({"name": name}));
    }
    if let Some(every) = spec.text("interval").and_then(|i| interval(&i)) {
        out.insert("interval".into(), json!(every));
    }
    report.leftovers(spec, GIT_REASONS, "Tether's source has no such field");
    (Value::Object(out), report.findings)
}

/// `secretRef`: the same name, noted because Tether's Secret must sit
/// beside the Application and be labelled for it.
pub(crate) fn secret(
    spec: &mut Fields,
    out: &mut Map<String, Value>,
    report: &mut Report<'_>,
    input: &Input,
    options: &Options,
) {
    let at = spec.at("secretRef");
    let Some(name) = spec.nested("secretRef").text("name") else {
        return;
    };
    let namespace = super::target_namespace(options, input.namespace());
    report.note(
        &at,
        format!(
            "Tether reads Secret {name} from the Application's namespace {namespace}, labelled \
             tether.dev/secret-type=repository, with keys username/password, sshPrivateKey and \
             knownHosts (Flux's identity and known_hosts)"
        ),
    );
    out.insert("secretRef".into(), json!({"name": name}));
}

/// Takes the `suspended` mark [`git_source`] leaves on a source.
pub(crate) fn take_suspended(source: &mut Value) -> bool {
    source
        .as_object_mut()
        .and_then(|source| source.remove("suspended"))
        .is_some_and(|flag| flag == Value::Bool(true))
}

/// Flux's semver range (Masterminds) as Tether reads one: an `x`
/// wildcard as `*`, a bare version as exactly it.
pub(crate) fn semver_range(range: &str) -> String {
    let range = range.replace(['x', 'X'], "*");
    match range.contains(['<', '>', '=', '~', '^', '*', ' ', ',']) {
        true => range,
        false => format!("={range}"),
    }
}
