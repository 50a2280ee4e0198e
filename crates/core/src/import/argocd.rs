//! Argo CD `Application` → Tether `Application`: destination, sync policy,
//! retries, ignored differences, finalizer; the sources are
//! [`super::argocd_source`]'s.

use serde_json::{Map, Value, json};

use super::argocd_source::{SourceContext, source};
use super::report::{Fields, Finding, Report};
use super::{
    Detect, Input, Options, application as tether_application, entry_texts, host_name,
    other_namespaces,
};

/// The in-cluster destination, as Argo CD names it.
const LOCAL_SERVER: &str = "https://kubernetes.default.svc";
const LOCAL_NAME: &str = "in-cluster";
/// Argo CD's cascading-delete finalizer, and Tether's.
const ARGO_FINALIZERS: [&str; 2] = [
    "resources-finalizer.argocd.argoproj.io",
    "resources-finalizer.argocd.argoproj.io/foreground",
];
const TETHER_CASCADE: &str = "tether.dev/cascade";

/// Why Argo CD's Application fields without a Tether counterpart are left
/// out.
const SPEC_REASONS: &[(&str, &str)] = &[
    (
        "revisionHistoryLimit",
        "Tether keeps the last 10 syncs in status.history",
    ),
    (
        "info",
        "Tether has no free-form info; put it in an annotation",
    ),
    (
        "sourceHydrator",
        "Tether renders at sync time and does not push hydrated manifests",
    ),
];

const SYNC_POLICY_REASONS: &[(&str, &str)] = &[(
    "managedNamespaceMetadata",
    "Tether labels the namespace it creates tether.dev only; declare the Namespace in Git to set its metadata",
)];

/// Argo CD sync options (`Key=value`) Tether has no counterpart for, and why.
const SYNC_OPTIONS_NOT_MAPPED: &[(&[&str], &str)] = &[
    (
        &["Validate=false"],
        "Tether always validates by dry-run first, so a bad commit never half-applies",
    ),
    (
        &["Replace=true", "Force=true"],
        "Tether never deletes and recreates objects; it applies server-side",
    ),
    (
        &["PruneLast=true"],
        "Tether prunes after the applies of a sync succeed; use sync waves to order the rest",
    ),
    (
        &["Prune=confirm", "Delete=confirm"],
        "Tether has no confirmation step; prune stays off, or use prunePropagation and the mass-prune breaker",
    ),
    (
        &["SkipDryRunOnMissingResource=true"],
        "Tether dry-runs every object; CRDs in the same commit are applied first",
    ),
];

/// Converts the Argo CD Application of `input`.
pub fn application(
    input: &Input,
    options: &Options,
    detect: &mut Detect<'_>,
) -> (Option<Value>, Vec<Finding>) {
    let mut report = Report::of(input);
    let app = convert(&input.object, &mut report, options, detect);
    (app, report.findings)
}

/// Converts the Argo CD Application `argo`, reporting into `report`.
pub(crate) fn convert(
    argo: &Value,
    report: &mut Report<'_>,
    options: &Options,
    detect: &mut Detect<'_>,
) -> Option<Value> {
    let mut metadata = Fields::of(argo.get("metadata"), "metadata");
    let name = metadata.text("name")?;
    let from_namespace = metadata.text("namespace");
    let namespace = super::target_namespace(options, from_namespace.as_deref());
    let labels = metadata.take("labels");
    let mut spec = Fields::of(argo.get("spec"), "spec");
    let mut out = Map::new();

    // Where the objects go.
    let mut destination_fields = spec.nested("destination");
    let destination = destination(&mut destination_fields, report, argo);
    report.leftovers(
        destination_fields,
        &[],
        "Tether has no such destination field",
    );

    // Where they come from.
    let context = SourceContext {
        app_name: &name,
        destination_namespace: destination["namespace"].as_str().unwrap_or_default(),
    };
    if let Some(single) = spec.take("source") {
        let mut fields = Fields::of(Some(&single), "spec.source");
        if let Some(converted) = source(&mut fields, &context, report, detect) {
            out.insert("source".into(), converted);
        }
    }
    let sources: Vec<Value> = spec
        .list("sources")
        .iter()
        .enumerate()
        .filter_map(|(index, item)| {
            let mut fields = Fields::of(Some(item), &format!("spec.sources[{index}]"));
            source(&mut fields, &context, report, detect)
        })
        .collect();
    if !sources.is_empty() {
        out.insert("sources".into(), Value::Array(sources));
    }
    if !out.contains_key("source") && !out.contains_key("sources") {
        report.not_mapped(
            "spec.source",
            "no source that Tether can read; nothing imported",
        );
        return None;
    }
    out.insert("destination".into(), destination);

    if let Some(project) = spec.text("project").filter(|p| p != "default") {
        out.insert("project".into(), json!(project));
    }
    let mut policy_fields = spec.nested("syncPolicy");
    out.insert("syncPolicy".into(), sync_policy(&mut policy_fields, report));
    report.leftovers(
        policy_fields,
        SYNC_POLICY_REASONS,
        "Tether has no such sync policy",
    );
    let ignore = ignore_differences(spec.list("ignoreDifferences"), report);
    if !ignore.is_empty() {
        out.insert("ignoreDifferences".into(), Value::Array(ignore));
    }
    report.leftovers(spec, SPEC_REASONS, "Tether has no such field");

    let mut app = tether_application(
        &name,
        &namespace,
        &format!("argocd {}", report.object),
        labels,
        Value::Object(out),
    );
    let finalizers = finalizers(metadata.list("finalizers"), report);
    if !finalizers.is_empty() {
        app["metadata"]["finalizers"] = Value::Array(finalizers);
    }
    annotations(metadata.take("annotations"), report);
    Some(app)
}

/// `destination`: the local cluster or a registered one, and the
/// namespaces the app's objects may name (from Argo CD's status, when the
/// object read has one).
fn destination(fields: &mut Fields, report: &mut Report<'_>, argo: &Value) -> Value {
    let server = fields.text("server");
    let name = fields.text("name");
    let namespace = match fields.text("namespace") {
        Some(namespace) => namespace,
        None => {
            report.note(
                "spec.destination.namespace",
                "Argo CD allows none (every object names its own); Tether needs one: default used",
            );
            "default".to_string()
        }
    };
    let mut out = Map::new();
    let local = name.as_deref() == Some(LOCAL_NAME)
        || (name.is_none()
            && server
                .as_deref()
                .is_none_or(|s| s.trim_end_matches('/') == LOCAL_SERVER));
    if !local {
        let cluster = name.unwrap_or_else(|| host_name(server.as_deref().unwrap_or_default()));
        report.note(
            "spec.destination",
            format!(
                "another cluster: register it as {cluster} with `tether cluster add {cluster} \
                 --kubeconfig …` before applying"
            ),
        );
        out.insert("cluster".into(), json!(cluster));
    }
    out.insert("namespace".into(), json!(namespace));
    // Argo CD lets an app write to any namespace; Tether only to the ones
    // listed. Its status says which ones the app has.
    let others = other_namespaces(
        entry_texts(argo, "/status/resources", "namespace"),
        &namespace,
    );
    if !others.is_empty() {
        out.insert("allowNamespaces".into(), json!(others));
    }
    Value::Object(out)
}

/// `syncPolicy`, with `adoptExisting` set so what Argo CD applied is taken
/// over in place.
fn sync_policy(fields: &mut Fields, report: &mut Report<'_>) -> Value {
    let mut out = Map::new();
    // Argo CD syncs on its own only with `automated` set (and not
    // `enabled: false`); self-heal and prune are off unless asked.
    let mut automated = fields.nested("automated");
    let on = automated.present && automated.flag("enabled") != Some(false);
    let prune = automated.flag("prune").unwrap_or(false) && on;
    let self_heal = automated.flag("selfHeal").unwrap_or(false) && on;
    if automated.flag("allowEmpty") == Some(true) {
        report.not_mapped(
            &automated.at("allowEmpty"),
            "Tether never prunes on an empty render",
        );
    }
    report.leftovers(automated, &[], "Tether has no such automated option");
    out.insert("automated".into(), json!(on));
    out.insert("selfHeal".into(), json!(self_heal));
    out.insert("prune".into(), json!(prune));
    out.insert("adoptExisting".into(), json!(true));
    let options = fields.list("syncOptions");
    let options_at = fields.at("syncOptions");
    for option in options.iter().filter_map(Value::as_str) {
        sync_option(option, &options_at, &mut out, report);
    }
    let mut retry = fields.nested("retry");
    if let Some(converted) = self::retry(&mut retry, report) {
        out.insert("retry".into(), converted);
    }
    report.leftovers(retry, &[], "Tether has no such retry option");
    Value::Object(out)
}

/// One `syncOptions` entry (`CreateNamespace=true`).
fn sync_option(option: &str, at: &str, out: &mut Map<String, Value>, report: &mut Report<'_>) {
    let (key, value) = option.split_once('=').unwrap_or((option, "true"));
    let value = value.trim();
    let field = format!("{at}: {option}");
    match (key.trim(), value) {
        ("CreateNamespace", "true") => {
            out.insert("createNamespace".into(), json!(true));
        }
        ("CreateNamespace", _) => {}
        ("PrunePropagationPolicy", policy @ ("foreground" | "background" | "orphan")) => {
            out.insert("prunePropagation".into(), json!(policy));
        }
        // What Tether always does.
        ("ServerSideApply", "true")
        | ("ApplyOutOfSyncOnly", "true")
        | ("RespectIgnoreDifferences", "true")
        | ("FailOnSharedResource", "true") => {}
        (key, value) => {
            let spelled = format!("{key}={value}");
            let why = SYNC_OPTIONS_NOT_MAPPED
                .iter()
                .find(|(options, _)| options.contains(&spelled.as_str()))
                .map_or("Tether has no such sync option", |(_, why)| why);
            report.not_mapped(&field, why);
        }
    }
}

/// `retry`: Argo CD's limit and back-off as Tether's.
fn retry(fields: &mut Fields, report: &mut Report<'_>) -> Option<Value> {
    if fields.is_empty() {
        return None;
    }
    let mut out = Map::new();
    let limit_at = fields.at("limit");
    match fields.take("limit").and_then(|l| l.as_i64()) {
        Some(limit) if limit >= 0 => {
            out.insert("limit".into(), json!(limit));
        }
        Some(_) => report.not_mapped(
            &limit_at,
            "Tether has no unlimited retries: it retries 5 times per revision, then once per resync",
        ),
        None => {}
    }
    let mut backoff = fields.nested("backoff");
    for (key, seconds_key) in [
        ("duration", "backoffSeconds"),
        ("maxDuration", "maxBackoffSeconds"),
    ] {
        let at = backoff.at(key);
        if let Some(duration) = backoff.text(key) {
            match super::seconds(&duration) {
                Some(seconds) => {
                    out.insert(seconds_key.into(), json!(seconds.max(1)));
                }
                None => report.not_mapped(&at, "not a duration Tether reads"),
            }
        }
    }
    let factor_at = backoff.at("factor");
    if let Some(factor) = backoff.take("factor")
        && factor.as_f64() != Some(2.0)
    {
        report.not_mapped(&factor_at, "Tether always doubles the back-off");
    }
    report.leftovers(backoff, &[], "Tether has no such back-off option");
    (!out.is_empty()).then_some(Value::Object(out))
}

/// `ignoreDifferences`: JSON pointers and field managers carry over;
/// jq expressions do not.
fn ignore_differences(rules: Vec<Value>, report: &mut Report<'_>) -> Vec<Value> {
    let mut out = Vec::new();
    for (index, rule) in rules.iter().enumerate() {
        let mut fields = Fields::of(Some(rule), &format!("spec.ignoreDifferences[{index}]"));
        let mut converted = fields.texts(&["group", "kind", "name", "namespace"]);
        let mut ignores = false;
        for key in ["jsonPointers", "managedFieldsManagers"] {
            let values = fields.list(key);
            if !values.is_empty() {
                ignores = true;
                converted.insert(key.into(), Value::Array(values));
            }
        }
        let jq_at = fields.at("jqPathExpressions");
        if !fields.list("jqPathExpressions").is_empty() {
            report.not_mapped(
                &jq_at,
                "Tether takes RFC 6901 JSON pointers only (a `*` segment matches every key or \
                 element): write each expression as jsonPointers",
            );
        }
        report.leftovers(fields, &[], "Tether has no such ignore option");
        if ignores && converted.contains_key("kind") {
            out.push(Value::Object(converted));
        }
    }
    out
}

/// Argo CD's cascade finalizer as Tether's; others are reported.
fn finalizers(finalizers: Vec<Value>, report: &mut Report<'_>) -> Vec<Value> {
    let mut out = Vec::new();
    for finalizer in finalizers.iter().filter_map(Value::as_str) {
        if ARGO_FINALIZERS.contains(&finalizer) {
            if out.is_empty() {
                out.push(json!(TETHER_CASCADE));
            }
            report.note(
                "metadata.finalizers",
                format!(
                    "{finalizer} becomes {TETHER_CASCADE}: deleting the app deletes its objects, \
                     except the ones it adopted (unless syncPolicy.pruneAdopted)"
                ),
            );
        } else {
            report.not_mapped(
                "metadata.finalizers",
                format!("{finalizer}: Tether knows only its own finalizer"),
            );
        }
    }
    out
}

/// Argo CD's own annotations on the Application are reported; Tether
/// reads none of them.
fn annotations(annotations: Option<Value>, report: &mut Report<'_>) {
    let Some(Value::Object(annotations)) = annotations else {
        return;
    };
    for key in annotations.keys() {
        if key == "kubectl.kubernetes.io/last-applied-configuration" {
            continue;
        }
        let why = match key.as_str() {
            key if key.starts_with("notifications.argoproj.io/") => {
                "Tether notifies through its alert settings (tether run --alert-…), not per-app annotations"
            }
            key if key.starts_with("argocd-image-updater.argoproj.io/") => {
                "Tether does not update images; commit the new tag to Git"
            }
            _ => "Tether does not read annotations on an Application",
        };
        report.not_mapped(&format!("metadata.annotations.{key}"), why);
    }
}
