//! Argo CD `ApplicationSet` → the Tether Applications it would generate.
//! Tether has no generators yet, so only a `list` generator, whose
//! elements are all in the object, can be expanded here; every other
//! generator depends on state outside it (clusters, Git, an SCM, a plugin)
//! and is reported.

use serde_json::{Map, Value};

use super::report::{Finding, Report};
use super::{Detect, Input, Options, argocd, object_name};

const GENERATOR_WHY: &str = "Tether has no ApplicationSet generators yet: it depends on state \
     outside the object, so its Applications cannot be written here; write them (or generate \
     them in CI) until Tether has generators";

const SPEC_REASONS: &[(&str, &str)] = &[
    (
        "syncPolicy",
        "Tether has no ApplicationSet controller: the Applications written here are kept or \
         deleted like any other",
    ),
    (
        "strategy",
        "Tether has no progressive syncs of generated apps",
    ),
    (
        "templatePatch",
        "Tether does not evaluate Go templates: apply the patch to the printed Applications",
    ),
    ("preservedFields", "Tether has no ApplicationSet controller"),
    (
        "ignoreApplicationDifferences",
        "Tether has no ApplicationSet controller",
    ),
    (
        "goTemplateOptions",
        "Tether substitutes plain {{.key}} references only",
    ),
];

/// The Applications of the ApplicationSet of `input`.
pub fn application_set(
    input: &Input,
    options: &Options,
    detect: &mut Detect<'_>,
) -> (Vec<Value>, Vec<Finding>) {
    let set = &input.object;
    let mut report = Report::new(input, object_name(set));
    let mut spec = super::report::Fields::spec(input);
    let go_template = spec.flag("goTemplate").unwrap_or(false);
    let template = spec.take("template").unwrap_or(Value::Null);
    let generators = spec.list("generators");
    report.leftovers(
        spec,
        SPEC_REASONS,
        "Tether has no ApplicationSet controller",
    );
    let namespace = set.pointer("/metadata/namespace").cloned();
    let mut findings = report.findings;
    let mut apps = Vec::new();
    for (index, generator) in generators.iter().enumerate() {
        let mut report = Report::new(input, object_name(set));
        let at = format!("spec.generators[{index}]");
        let Some((kind, body)) = generator.as_object().and_then(|g| g.iter().next()) else {
            continue;
        };
        if kind != "list" {
            report.not_mapped(&format!("{at}.{kind}"), GENERATOR_WHY);
            findings.extend(report.findings);
            continue;
        }
        for key in body.as_object().into_iter().flatten().map(|(k, _)| k) {
            if key != "elements" {
                report.not_mapped(
                    &format!("{at}.list.{key}"),
                    "only literal elements are expanded",
                );
            }
        }
        findings.extend(report.findings);
        let elements = body["elements"].as_array().cloned().unwrap_or_default();
        for (number, element) in elements.iter().enumerate() {
            let mut missing = Vec::new();
            let rendered = substitute(&template, element, go_template, "", &mut missing);
            let mut argo = Map::new();
            argo.insert("apiVersion".into(), "argoproj.io/v1alpha1".into());
            argo.insert("kind".into(), "Application".into());
            let mut metadata = rendered["metadata"].clone();
            if metadata.get("namespace").is_none()
                && let Some(namespace) = &namespace
            {
                metadata["namespace"] = namespace.clone();
            }
            argo.insert("metadata".into(), metadata);
            argo.insert("spec".into(), rendered["spec"].clone());
            let argo = Value::Object(argo);
            let mut report = Report::new(
                input,
                format!("{} (ApplicationSet element {number})", object_name(&argo)),
            );
            report.located_under = "spec.template".to_string();
            for (field, reference) in &missing {
                report.not_mapped(
                    field,
                    format!(
                        "{reference}: the element has no such key, or it is a Go template \
                         expression Tether does not evaluate: this Application is not imported"
                    ),
                );
            }
            if !missing.is_empty() {
                findings.extend(report.findings);
                continue;
            }
            if let Some(app) = argocd::convert(&argo, &mut report, options, detect) {
                apps.push(app);
            }
            findings.extend(report.findings);
        }
    }
    (apps, findings)
}

/// `template` with every `{{key}}` (or `{{.key}}` in Go-template mode)
/// replaced by the element's value; references that cannot be resolved
/// are left as written and listed in `missing` with their field's path.
fn substitute(
    template: &Value,
    element: &Value,
    go: bool,
    at: &str,
    missing: &mut Vec<(String, String)>,
) -> Value {
    let mut unresolved = Vec::new();
    let value = match template {
        Value::String(text) => Value::String(substitute_text(text, element, go, &mut unresolved)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(index, item)| {
                    substitute(item, element, go, &format!("{at}[{index}]"), missing)
                })
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    let path = match at {
                        "" => key.clone(),
                        at => format!("{at}.{key}"),
                    };
                    let key = substitute_text(key, element, go, &mut unresolved);
                    (key, substitute(value, element, go, &path, missing))
                })
                .collect(),
        ),
        other => other.clone(),
    };
    missing.extend(
        unresolved
            .into_iter()
            .map(|reference| (at.to_string(), reference)),
    );
    value
}

fn substitute_text(text: &str, element: &Value, go: bool, missing: &mut Vec<String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open..].find("}}") else {
            break;
        };
        out.push_str(&rest[..open]);
        let reference = &rest[open..open + close + 2];
        let inner = rest[open + 2..open + close].trim();
        let key = match go {
            true => inner.strip_prefix('.'),
            false => Some(inner),
        };
        match key.and_then(|key| lookup(element, key)) {
            Some(value) => out.push_str(&value),
            None => {
                out.push_str(reference);
                missing.push(reference.to_string());
            }
        }
        rest = &rest[open + close + 2..];
    }
    out.push_str(rest);
    out
}

/// The element's value at `key`: a flat key (`values.env`, as Argo CD
/// flattens nested elements) or a path through mappings.
fn lookup(element: &Value, key: &str) -> Option<String> {
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_alphanumeric() || "._-".contains(c))
    {
        return None;
    }
    let found = element.get(key).or_else(|| {
        key.split('.')
            .try_fold(element, |here, part| here.get(part))
    })?;
    match found {
        Value::String(text) => Some(text.clone()),
        Value::Null | Value::Object(_) | Value::Array(_) => None,
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_are_replaced_and_expressions_left_and_listed() {
        let element = json!({"cluster": "dev", "values": {"env": "staging"}});
        let mut missing = Vec::new();
        assert_eq!(
            substitute_text("{{cluster}}-{{values.env}}", &element, false, &mut missing),
            "dev-staging"
        );
        assert_eq!(
            substitute_text(
                "{{ .cluster }}/{{ .cluster | upper }}",
                &element,
                true,
                &mut missing
            ),
            "dev/{{ .cluster | upper }}"
        );
        assert_eq!(missing, ["{{ .cluster | upper }}"]);
    }
}
