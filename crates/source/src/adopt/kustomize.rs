//! Kustomize sources: the adopted fields as a strategic-merge patch file
//! next to the kustomization, referenced from its `patches`.
//!
//! The patch names its target explicitly (group, kind, name): kustomize
//! matches a patch's own metadata against resources before its namespace
//! transformer runs, so a patch without a target misses objects whose
//! namespace the kustomization sets.

use std::path::Path;

use serde_json::{Map, Value, json};

use super::path::{Selector, Step, keyed_element};
use super::plan::Planned;
use super::yaml::{FieldEdit, edit_file};
use super::{AdoptError, scalar};
use crate::detect::KUSTOMIZATION_FILES;
use crate::files::in_dir;

/// Writes one patch file per object into the kustomization at `dir` and
/// references it. Returns the files written, repository-relative.
pub(crate) fn write(
    root: &Path,
    dir: &str,
    planned: &[Planned<'_>],
) -> Result<Vec<String>, AdoptError> {
    let dir = dir.trim_matches('/');
    let relative = |name: &str| in_dir(dir, name);
    let kustomization = KUSTOMIZATION_FILES
        .iter()
        .map(|name| relative(name))
        .find(|file| root.join(file).is_file())
        .ok_or_else(|| AdoptError::Unwritable {
            reason: format!("{dir:?} has no kustomization.yaml"),
        })?;
    let mut written = Vec::new();
    for plan in planned {
        let name = patch_file_name(&plan.manifest.object);
        let file = relative(&name);
        let mut patch =
            patch(&plan.manifest.object, &plan.fields).map_err(|message| AdoptError::Field {
                object: plan.object.clone(),
                path: plan.fields[0].path.to_string(),
                message,
            })?;
        let path = root.join(&file);
        if let Ok(previous) = std::fs::read_to_string(&path)
            && let Ok(previous) = serde_saphyr::from_str::<Value>(&previous)
        {
            patch = merge(previous, patch);
        }
        let text = format!(
            "# Live values adopted into Git by `tether adopt`.\n{}",
            scalar::block(&patch, 0).join("\n") + "\n"
        );
        std::fs::write(&path, text).map_err(|e| io(&file, e))?;
        written.push(file);
        if reference(root, &kustomization, &name, &plan.manifest.object)? {
            written.push(kustomization.clone());
        }
    }
    written.sort();
    written.dedup();
    Ok(written)
}

fn io(file: &str, error: std::io::Error) -> AdoptError {
    AdoptError::Io {
        path: file.into(),
        message: error.to_string(),
    }
}

/// `tether-adopt-<kind>-<name>.yaml`.
fn patch_file_name(object: &Value) -> String {
    let text = |key: &str| {
        object
            .pointer(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    let name: String = format!("{}-{}", text("/kind"), text("/metadata/name"))
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("tether-adopt-{name}.yaml")
}

/// Adds the patch to the kustomization's `patches` unless it is there;
/// returns whether the kustomization changed.
fn reference(
    root: &Path,
    kustomization: &str,
    name: &str,
    object: &Value,
) -> Result<bool, AdoptError> {
    let path = root.join(kustomization);
    let text = std::fs::read_to_string(&path).map_err(|e| io(kustomization, e))?;
    let current: Value = serde_saphyr::from_str(&text).unwrap_or(Value::Null);
    let patches = current.get("patches").and_then(Value::as_array);
    let listed = patches.is_some_and(|patches| {
        patches
            .iter()
            .any(|p| p.get("path").and_then(Value::as_str) == Some(name))
    });
    if listed {
        return Ok(false);
    }
    let mut target = Map::new();
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some((group, _)) = api_version.split_once('/') {
        target.insert("group".into(), json!(group));
    }
    target.insert("kind".into(), object["kind"].clone());
    target.insert("name".into(), object["metadata"]["name"].clone());
    let entry = json!({"path": name, "target": target});
    let edit = match patches {
        Some(patches) => FieldEdit {
            path: Selector(vec![
                Step::Field("patches".into()),
                Step::Index(patches.len()),
            ]),
            value: Some(entry),
        },
        None => FieldEdit {
            path: Selector(vec![Step::Field("patches".into())]),
            value: Some(json!([entry])),
        },
    };
    let text = edit_file(Path::new(kustomization), &text, 0, None, &[edit])?;
    std::fs::write(&path, text).map_err(|e| io(kustomization, e))?;
    Ok(true)
}

/// A strategic-merge patch of `object` that sets exactly `fields`: keyed
/// list elements by their keys (as SMP merges them), `null` to remove a
/// field, `$patch: delete` to remove an element; a list addressed by
/// position or value is written whole.
pub fn patch(object: &Value, fields: &[FieldEdit]) -> Result<Value, String> {
    let mut modified = object.clone();
    for field in fields {
        field.path.set(&mut modified, field.value.clone())?;
    }
    let mut metadata = Map::new();
    metadata.insert("name".into(), object["metadata"]["name"].clone());
    let mut patch = json!({
        "apiVersion": object["apiVersion"].clone(),
        "kind": object["kind"].clone(),
        "metadata": metadata,
    });
    for field in fields {
        let steps = field.path.steps();
        let whole_list = steps
            .iter()
            .position(|step| matches!(step, Step::Index(_) | Step::Value(_)));
        let (path, value) = match (whole_list, &field.value, steps.last()) {
            (Some(cut), _, _) => {
                let list = Selector(steps[..cut].to_vec());
                let value = list.get(&modified).cloned().unwrap_or(Value::Null);
                (list, value)
            }
            (None, Some(value), _) => (field.path.clone(), value.clone()),
            (None, None, Some(Step::Keyed(keys))) => {
                let mut element = keyed_element(keys);
                element["$patch"] = json!("delete");
                (field.path.clone(), element)
            }
            (None, None, _) => (field.path.clone(), Value::Null),
        };
        path.set(&mut patch, Some(value))?;
    }
    Ok(patch)
}

/// `new` over `old`: mappings merged key by key, lists of named elements
/// by name; anything else from `new`.
fn merge(old: Value, new: Value) -> Value {
    match (old, new) {
        (Value::Object(mut old), Value::Object(new)) => {
            for (key, value) in new {
                let merged = match old.remove(&key) {
                    Some(previous) => merge(previous, value),
                    None => value,
                };
                old.insert(key, merged);
            }
            Value::Object(old)
        }
        (Value::Array(mut old), Value::Array(new)) => {
            let name = |v: &Value| v.get("name").and_then(Value::as_str).map(str::to_string);
            if !old.iter().chain(&new).all(|v| name(v).is_some()) {
                return Value::Array(new);
            }
            for value in new {
                match old.iter().position(|o| name(o) == name(&value)) {
                    Some(i) => {
                        let previous = std::mem::take(&mut old[i]);
                        old[i] = merge(previous, value);
                    }
                    None => old.push(value),
                }
            }
            Value::Array(old)
        }
        (_, new) => new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(path: &str, value: Option<Value>) -> FieldEdit {
        FieldEdit {
            path: Selector::parse(path).unwrap(),
            value,
        }
    }

    #[test]
    fn a_patch_holds_exactly_the_adopted_fields_with_containers_by_name() {
        let object = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop", "labels": {"a": "b"}},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "app", "image": "a:1", "args": ["x", "y"]},
                {"name": "side", "image": "s:1"}]}}}
        });
        let patch = patch(
            &object,
            &[
                edit("spec.replicas", Some(json!(3))),
                edit(
                    "spec.template.spec.containers[name=app].image",
                    Some(json!("a:2")),
                ),
                edit(
                    "spec.template.spec.containers[name=app].args[1]",
                    Some(json!("z")),
                ),
                edit("spec.template.spec.containers[name=side]", None),
                edit("metadata.labels.a", None),
            ],
        )
        .unwrap();
        assert_eq!(
            patch,
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"a": null}},
                "spec": {"replicas": 3, "template": {"spec": {"containers": [
                    {"name": "app", "image": "a:2", "args": ["x", "z"]},
                    {"name": "side", "$patch": "delete"}]}}}
            })
        );
    }

    #[test]
    fn a_second_adoption_keeps_the_first_ones_fields() {
        let old = json!({"spec": {"replicas": 3, "c": [{"name": "app", "image": "a:2"}]}});
        let new = json!({"spec": {"c": [{"name": "app", "env": 1}, {"name": "b"}]}});
        assert_eq!(
            merge(old, new),
            json!({"spec": {"replicas": 3, "c": [{"name": "app", "image": "a:2", "env": 1}, {"name": "b"}]}})
        );
    }
}
