//! Helm sources: a values override, only when a field maps to a value.
//!
//! A chart's templates are code, so which value (if any) sets a field is
//! found by trying: every values key whose current value equals the field's
//! rendered value is a candidate; a candidate is taken when setting it to
//! the live value and rendering again changes exactly that field of that
//! object, to the live value, and nothing else. Otherwise the error prints
//! the patch to make by hand and why it was not made.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::path::{Selector, Step, build};
use super::plan::{Planned, render_checkout};
use super::yaml::{FieldEdit, edit_file};
use super::{AdoptError, scalar};
use crate::files::in_dir;
use crate::manifest::Manifest;
use crate::render::Sandbox;
use crate::spec::{HelmOptions, Source};

/// Writes each field as a values override into the last values file the
/// source lists (or the chart's `values.yaml`). Returns the file written.
pub(crate) fn write(
    root: &Path,
    source: &Source,
    options: &HelmOptions,
    planned: &[Planned<'_>],
    sandbox: &Sandbox,
) -> Result<Vec<String>, AdoptError> {
    let in_chart = |file: &str| in_dir(&source.path, file);
    let mut value_files = vec![in_chart("values.yaml")];
    value_files.extend(options.value_files.iter().map(|f| in_chart(f)));
    let target = value_files.last().expect("values.yaml is listed").clone();
    let mut rendered = render_checkout(root, source, sandbox)?;
    for plan in planned {
        for field in &plan.fields {
            let not_mappable = |reason: String| AdoptError::NotMappable {
                object: plan.object.clone(),
                path: field.path.to_string(),
                reason,
                patch: hand_patch(&plan.manifest.object, field),
            };
            let Some(live) = &field.value else {
                return Err(not_mappable(
                    "the field is absent live, and removing a field is not a values change".into(),
                ));
            };
            let object = object_of(&rendered, plan)?;
            let Some(desired) = field.path.get(object).cloned() else {
                return Err(not_mappable(
                    "the chart does not render this field, so no value sets it".into(),
                ));
            };
            let values = merged_values(root, &value_files);
            let mut expected = rendered.clone();
            let position = rendered
                .iter()
                .position(|m| m.id == plan.manifest.id)
                .expect("object_of found it");
            field
                .path
                .set(&mut expected[position].object, Some(live.clone()))
                .map_err(&not_mappable)?;
            let mut tried = Vec::new();
            let mut adopted = None;
            for key in candidates(&values, &desired) {
                let restore = set_value(root, &target, &key, live)?;
                let after = render_checkout(root, source, sandbox);
                match after {
                    Ok(after) if same_objects(&after, &expected) => {
                        adopted = Some(after);
                        break;
                    }
                    _ => {
                        restore()?;
                        tried.push(key.to_string());
                    }
                }
            }
            rendered = adopted.ok_or_else(|| {
                not_mappable(if tried.is_empty() {
                    format!(
                        "no value of {} equals the rendered value {}",
                        value_files.join(", "),
                        desired
                    )
                } else {
                    format!(
                        "changing {} does not change exactly this field to the live value",
                        tried.join(", ")
                    )
                })
            })?;
        }
    }
    Ok(vec![target])
}

fn object_of<'r>(rendered: &'r [Manifest], plan: &Planned<'_>) -> Result<&'r Value, AdoptError> {
    rendered
        .iter()
        .find(|m| m.id == plan.manifest.id)
        .map(|m| &m.object)
        .ok_or_else(|| AdoptError::NotFound {
            object: plan.object.clone(),
            path: "the chart".into(),
        })
}

/// The chart's values: each file over the ones before it.
fn merged_values(root: &Path, files: &[String]) -> Value {
    let mut merged = Value::Object(Map::new());
    for file in files {
        let text = std::fs::read_to_string(root.join(file)).unwrap_or_default();
        if let Ok(values) = serde_saphyr::from_str::<Value>(&text) {
            tether_core::import::overlay(&mut merged, values);
        }
    }
    merged
}

/// Paths of mapping keys whose value is `desired` (or reads as it: a
/// template may quote a number).
fn candidates(values: &Value, desired: &Value) -> Vec<Selector> {
    fn walk(value: &Value, path: &mut Vec<Step>, desired: &Value, out: &mut Vec<Selector>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    path.push(Step::Field(key.clone()));
                    walk(child, path, desired, out);
                    path.pop();
                }
            }
            Value::Array(_) => {}
            scalar if scalar == desired || scalar_eq(scalar, desired) => {
                out.push(Selector(path.clone()));
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(values, &mut Vec::new(), desired, &mut out);
    out
}

fn scalar_eq(a: &Value, b: &Value) -> bool {
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    text(a).is_some() && text(a) == text(b)
}

/// Sets `key` to `value` in the values file `file` (created if missing) and
/// returns how to put the file back.
fn set_value(
    root: &Path,
    file: &str,
    key: &Selector,
    value: &Value,
) -> Result<impl Fn() -> Result<(), AdoptError>, AdoptError> {
    let path = root.join(file);
    let io = |e: std::io::Error| AdoptError::Io {
        path: file.into(),
        message: e.to_string(),
    };
    let before = std::fs::read_to_string(&path).ok();
    let text = before.clone().unwrap_or_default();
    let has_document = serde_saphyr::from_str::<Value>(&text).is_ok_and(|v| v.is_object());
    let edited = if has_document {
        let edit = FieldEdit {
            path: key.clone(),
            value: Some(value.clone()),
        };
        edit_file(Path::new(file), &text, 0, None, &[edit])?
    } else {
        let built = build(key.steps(), value.clone()).unwrap_or(Value::Null);
        format!("{text}{}\n", scalar::block(&built, 0).join("\n"))
    };
    std::fs::write(&path, edited).map_err(io)?;
    Ok(move || {
        match &before {
            Some(text) => std::fs::write(&path, text),
            None => std::fs::remove_file(&path),
        }
        .map_err(io)
    })
}

fn same_objects(a: &[Manifest], b: &[Manifest]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.id == y.id && x.object == y.object)
}

/// The field as a patch of the object, in YAML, for a human to apply.
fn hand_patch(object: &Value, field: &FieldEdit) -> String {
    let mut metadata = Map::new();
    metadata.insert("name".into(), object["metadata"]["name"].clone());
    if let Some(namespace) = object["metadata"].get("namespace") {
        metadata.insert("namespace".into(), namespace.clone());
    }
    let mut patch = json!({
        "apiVersion": object["apiVersion"].clone(),
        "kind": object["kind"].clone(),
        "metadata": metadata,
    });
    let value = field.value.clone().unwrap_or(Value::Null);
    if field.path.set(&mut patch, Some(value)).is_err() {
        return format!(
            "{}: {}",
            field.path,
            scalar::flow(
                field.value.as_ref().unwrap_or(&Value::Null),
                scalar::Flavor::Yaml
            )
        );
    }
    scalar::block(&patch, 2).join("\n")
}
