//! The plan: which generated Applications to create, update and delete,
//! from what the generators made now and what the set made before.
//!
//! An Application is the set's when it carries [`SET_LABEL`] naming the
//! set (the controller also makes the set its owner). Each generated app
//! carries [`DIGEST_ANNOTATION`], the SHA-256 of what the template made,
//! so an unchanged app costs no write.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The label naming the ApplicationSet that generated an Application.
pub const SET_LABEL: &str = "tether.dev/application-set";
/// The annotation holding the digest of the generated Application.
pub const DIGEST_ANNOTATION: &str = "tether.dev/application-set-digest";

/// What the set may do to its Applications (Argo CD's
/// `syncPolicy.applicationsSync`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncMode {
    /// Create, update and delete (default).
    #[default]
    Sync,
    /// Create only: never change or delete an app once made.
    CreateOnly,
    /// Create and update, never delete.
    CreateUpdate,
    /// Create and delete, never update.
    CreateDelete,
}

impl SyncMode {
    fn updates(self) -> bool {
        matches!(self, SyncMode::Sync | SyncMode::CreateUpdate)
    }

    fn deletes(self) -> bool {
        matches!(self, SyncMode::Sync | SyncMode::CreateDelete)
    }
}

/// The set's `syncPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub mode: SyncMode,
    /// Keep an app's objects when the set deletes the app (default true;
    /// `false` deletes them with it, through the app's cascade finalizer).
    pub preserve_resources: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            mode: SyncMode::Sync,
            preserve_resources: true,
        }
    }
}

/// An Application that exists under a generated name or with the set's label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Existing {
    pub name: String,
    /// It carries the set's label.
    pub owned: bool,
    /// Its [`DIGEST_ANNOTATION`].
    pub digest: Option<String>,
    /// It is being deleted already.
    pub deleting: bool,
}

/// An app to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    pub name: String,
    /// With its objects (else they stay in place).
    pub cascade: bool,
}

/// What to do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// New apps, each with its digest annotation set.
    pub create: Vec<Value>,
    /// Apps whose generated form changed, digest annotation set.
    pub update: Vec<Value>,
    /// Apps generated as they are.
    pub unchanged: Vec<String>,
    pub delete: Vec<Deletion>,
    /// Generated names another Application (not the set's) holds: left alone.
    pub conflicts: Vec<String>,
    /// Apps the policy keeps although they changed or are no longer generated.
    pub kept: Vec<String>,
}

/// Why nothing is planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("two parameter sets generate Application {name}")]
    Duplicate { name: String },
}

/// The digest of a generated app.
pub fn digest(app: &Value) -> String {
    let hash = Sha256::digest(app.to_string().as_bytes());
    hash.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The plan for `desired` (expanded Applications, each with
/// `metadata.name`) against `existing`.
pub fn plan(desired: Vec<Value>, existing: &[Existing], policy: Policy) -> Result<Plan, PlanError> {
    let existing: BTreeMap<&str, &Existing> =
        existing.iter().map(|e| (e.name.as_str(), e)).collect();
    let mut plan = Plan::default();
    let mut names = BTreeSet::new();
    for mut app in desired {
        let name = app["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !names.insert(name.clone()) {
            return Err(PlanError::Duplicate { name });
        }
        let sum = digest(&app);
        if let Some(meta) = app["metadata"].as_object_mut() {
            let annotations = meta
                .entry("annotations")
                .or_insert_with(|| Value::Object(Default::default()));
            annotations[DIGEST_ANNOTATION] = Value::String(sum.clone());
        }
        match existing.get(name.as_str()) {
            None => plan.create.push(app),
            Some(found) if !found.owned => plan.conflicts.push(name),
            Some(found) if found.digest.as_deref() == Some(sum.as_str()) => {
                plan.unchanged.push(name)
            }
            Some(_) if policy.mode.updates() => plan.update.push(app),
            Some(_) => plan.kept.push(name),
        }
    }
    for found in existing.values() {
        if !found.owned || names.contains(found.name.as_str()) || found.deleting {
            continue;
        }
        match policy.mode.deletes() {
            true => plan.delete.push(Deletion {
                name: found.name.clone(),
                cascade: !policy.preserve_resources,
            }),
            false => plan.kept.push(found.name.clone()),
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn app(name: &str, path: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"source": {"path": path}}})
    }

    fn owned(name: &str, digest: Option<String>) -> Existing {
        Existing {
            name: name.into(),
            owned: true,
            digest,
            deleting: false,
        }
    }

    #[test]
    fn new_apps_are_created_changed_ones_updated_and_same_ones_left() {
        let same = digest(&app("cart", "apps/cart"));
        let existing = [owned("cart", Some(same)), owned("shop", Some("old".into()))];
        let plan = plan(
            vec![
                app("cart", "apps/cart"),
                app("shop", "apps/shop"),
                app("web", "apps/web"),
            ],
            &existing,
            Policy::default(),
        )
        .unwrap();
        assert_eq!(plan.unchanged, ["cart"]);
        assert_eq!(plan.update[0]["metadata"]["name"], "shop");
        assert_eq!(plan.create[0]["metadata"]["name"], "web");
        assert_eq!(
            plan.create[0]["metadata"]["annotations"][DIGEST_ANNOTATION],
            digest(&app("web", "apps/web"))
        );
        assert!(plan.delete.is_empty());
    }

    #[test]
    fn an_app_no_longer_generated_is_deleted_keeping_its_objects_by_default() {
        let plan = plan(vec![], &[owned("old", None)], Policy::default()).unwrap();
        assert_eq!(
            plan.delete,
            [Deletion {
                name: "old".into(),
                cascade: false
            }]
        );
        let cascading = super::plan(
            vec![],
            &[owned("old", None)],
            Policy {
                preserve_resources: false,
                ..Policy::default()
            },
        )
        .unwrap();
        assert!(cascading.delete[0].cascade);
    }

    #[test]
    fn create_update_keeps_apps_no_longer_generated_and_create_only_keeps_changes() {
        let keep = |mode| Policy {
            mode,
            preserve_resources: true,
        };
        let kept = plan(vec![], &[owned("old", None)], keep(SyncMode::CreateUpdate)).unwrap();
        assert_eq!(kept.kept, ["old"]);
        assert!(kept.delete.is_empty());
        let frozen = plan(
            vec![app("shop", "new")],
            &[owned("shop", Some("old".into()))],
            keep(SyncMode::CreateOnly),
        )
        .unwrap();
        assert!(frozen.update.is_empty());
        assert_eq!(frozen.kept, ["shop"]);
    }

    #[test]
    fn an_app_the_set_does_not_own_is_never_touched() {
        let foreign = Existing {
            owned: false,
            ..owned("shop", None)
        };
        let plan = plan(vec![app("shop", "x")], &[foreign], Policy::default()).unwrap();
        assert_eq!(plan.conflicts, ["shop"]);
        assert!(plan.create.is_empty() && plan.update.is_empty() && plan.delete.is_empty());
    }

    #[test]
    fn two_parameter_sets_making_one_name_are_refused() {
        let error = plan(vec![app("a", "x"), app("a", "y")], &[], Policy::default()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "two parameter sets generate Application a"
        );
    }

    #[test]
    fn the_sync_modes_read_as_argo_cd_writes_them() {
        let mode: SyncMode = serde_json::from_value(json!("create-update")).unwrap();
        assert_eq!(mode, SyncMode::CreateUpdate);
    }
}
