//! Which files change, per renderer, and the check that they now render
//! to the live values.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use tether_core::ObjectRef;

use super::path::Selector;
use super::plan::{Planned, render_checkout};
use super::yaml::{FieldEdit, edit_file};
use super::{AdoptError, Adoption, helm, kustomize};
use crate::render::Sandbox;
use crate::spec::{Renderer, Source};

/// Refuses what must never be written: nothing at all, and Secret values.
pub fn check(objects: &[Adoption]) -> Result<(), AdoptError> {
    if objects.iter().all(|adoption| adoption.fields.is_empty()) {
        return Err(AdoptError::NoDrift);
    }
    for adoption in objects {
        let secret = adoption.object.group.is_empty() && adoption.object.kind == "Secret";
        for field in &adoption.fields {
            let selector = selector(&adoption.object, &field.path)?;
            if secret
                && (selector.starts_with_fields(&["data"])
                    || selector.starts_with_fields(&["stringData"]))
            {
                return Err(AdoptError::Secret {
                    object: adoption.object.clone(),
                    path: field.path.clone(),
                });
            }
        }
    }
    Ok(())
}

fn selector(object: &ObjectRef, path: &str) -> Result<Selector, AdoptError> {
    Selector::parse(path).map_err(|error| AdoptError::Selector {
        object: object.clone(),
        error,
    })
}

/// Writes the live values of `objects` into the checkout of the source's
/// repository at `root`, then renders it again and checks that every
/// adopted field has its live value. Returns the repository-relative
/// paths of the files written.
pub fn write(
    root: &Path,
    source: &Source,
    default_namespace: &str,
    objects: &[Adoption],
    sandbox: &Sandbox,
) -> Result<Vec<String>, AdoptError> {
    check(objects)?;
    let manifests = render_checkout(root, source, sandbox)?;
    let mut planned = Vec::new();
    for adoption in objects.iter().filter(|a| !a.fields.is_empty()) {
        let manifest = manifests
            .iter()
            .find(|m| same_object(&m.id, &adoption.object, default_namespace))
            .ok_or_else(|| AdoptError::NotFound {
                object: adoption.object.clone(),
                path: source.path.clone(),
            })?;
        let fields = adoption
            .fields
            .iter()
            .map(|field| {
                Ok(FieldEdit {
                    path: selector(&adoption.object, &field.path)?,
                    value: field.live.clone(),
                })
            })
            .collect::<Result<Vec<_>, AdoptError>>()?;
        planned.push(Planned {
            object: &adoption.object,
            manifest,
            fields,
        });
    }
    let written = match &source.renderer {
        Renderer::Directory(_) => write_files(root, &planned)?,
        Renderer::Kustomize(_) => kustomize::write(root, &source.path, &planned)?,
        Renderer::Helm(options) => helm::write(root, source, options, &planned, sandbox)?,
        Renderer::Jsonnet(_) => {
            return Err(AdoptError::NoOrigin {
                object: planned[0].object.clone(),
                renderer: source.renderer.name().into(),
            });
        }
    };
    let rendered = render_checkout(root, source, sandbox)?;
    for plan in &planned {
        let object = rendered
            .iter()
            .find(|m| m.id == plan.manifest.id)
            .map(|m| &m.object);
        for field in &plan.fields {
            let now = object.and_then(|o| field.path.get(o));
            if now != field.value.as_ref() {
                return Err(AdoptError::Field {
                    object: plan.object.clone(),
                    path: field.path.to_string(),
                    message: format!(
                        "after writing {}, the source renders {} instead of the live value",
                        written.join(", "),
                        now.map_or("nothing".to_string(), Value::to_string)
                    ),
                });
            }
        }
    }
    Ok(written)
}

/// Whether a manifest declares `object`, the manifest's missing namespace
/// being the default one.
pub(crate) fn same_object(
    manifest: &ObjectRef,
    object: &ObjectRef,
    default_namespace: &str,
) -> bool {
    let namespace = match (&manifest.namespace, &object.namespace) {
        (Some(a), Some(b)) => a == b,
        (None, Some(b)) => b == default_namespace,
        (None, None) => true,
        (Some(_), None) => false,
    };
    manifest.group == object.group
        && manifest.kind == object.kind
        && manifest.name == object.name
        && namespace
}

/// Plain directories: each object's own file and document.
fn write_files(root: &Path, planned: &[Planned<'_>]) -> Result<Vec<String>, AdoptError> {
    let mut by_file: BTreeMap<&Path, Vec<&Planned<'_>>> = BTreeMap::new();
    for plan in planned {
        by_file
            .entry(plan.manifest.origin.file.as_path())
            .or_default()
            .push(plan);
    }
    let mut written = Vec::new();
    for (file, plans) in by_file {
        let path = root.join(file);
        let io = |e: std::io::Error| AdoptError::Io {
            path: file.to_path_buf(),
            message: e.to_string(),
        };
        let mut text = std::fs::read_to_string(&path).map_err(io)?;
        for plan in plans {
            let origin = &plan.manifest.origin;
            text = edit_file(file, &text, origin.document, origin.item, &plan.fields)?;
        }
        std::fs::write(&path, text).map_err(io)?;
        written.push(file.to_string_lossy().into_owned());
    }
    Ok(written)
}
