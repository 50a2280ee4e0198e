//! `tether adopt APP`: which drift to adopt, the live values it has now,
//! and the hand-off to `tether_source::adopt`.
//!
//! [`records_to_adopt`] decides from the Application's status (pure);
//! [`adopt_records`] is the seam any caller uses — the CLI with the app's
//! drift, a break-glass window with its own records and reason: it reads
//! every field's current live value from the cluster (status may be
//! stale), then writes them into Git as one commit.

use kube::Client;
use serde_json::{Value, json};
use tether_cluster::{Applier, ClusterError, Resources};
use tether_core::ObjectRef;
use tether_core::drift::{DriftKind, DriftRecord, DriftedField};
use tether_source::adopt::{
    self as source_adopt, Adopted, AdoptedField, Adoption, Author, Request, Selector,
};
use tether_source::{Credentials, Sandbox};

use crate::api::{Application, BreakGlass};

/// The drift of one object to adopt: which fields.
#[derive(Debug, Clone, PartialEq)]
pub struct AdoptRecord {
    pub object: ObjectRef,
    pub fields: Vec<DriftedField>,
}

impl From<&DriftRecord> for AdoptRecord {
    fn from(record: &DriftRecord) -> Self {
        AdoptRecord {
            object: record.object.clone(),
            fields: record.fields.clone(),
        }
    }
}

/// How to commit: the operator, the branch, credentials, renderer bounds.
#[derive(Debug, Clone)]
pub struct AdoptOptions {
    pub author: Author,
    /// A new branch to commit on; `None`: the tracked branch.
    pub branch: Option<String>,
    pub credentials: Option<Credentials>,
    pub sandbox: Sandbox,
}

/// Why adopting failed. Nothing is written to Git on any of these but
/// [`AdoptError::Source`] with `PushRefused` (a local commit is kept).
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    #[error(
        "{app}: no emergency drift to adopt (pass --all-drift to adopt Manual drift: {manual} object(s))"
    )]
    NoEmergencyDrift { app: String, manual: usize },
    #[error("{app}: no drift to adopt")]
    NoDrift { app: String },
    #[error("{object}: no longer exists live; there is nothing to adopt")]
    Gone { object: ObjectRef },
    #[error("{object}: finding its API version: {reason}")]
    UnknownKind { object: ObjectRef, reason: String },
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Source(#[from] source_adopt::AdoptError),
    #[error("adopt stopped: {0}")]
    Join(String),
}

/// The records of `app`'s current drift to adopt: Emergency drift; with
/// `all_drift`, Manual drift too. Accidental drift (missing objects, half
/// syncs) is never adopted: Git is right about it.
pub fn records_to_adopt(
    app: &Application,
    all_drift: bool,
) -> Result<Vec<AdoptRecord>, AdoptError> {
    let name = format!(
        "{}/{}",
        app.metadata.namespace.as_deref().unwrap_or_default(),
        app.metadata.name.as_deref().unwrap_or_default()
    );
    let drift = app
        .status
        .as_ref()
        .map(|s| s.drift.as_slice())
        .unwrap_or(&[]);
    let open = || drift.iter().filter(|entry| entry.resolved_at.is_none());
    let of_kind = |kind: DriftKind| -> Vec<AdoptRecord> {
        open()
            .filter(|entry| entry.record.kind == kind && !entry.record.fields.is_empty())
            .map(|entry| AdoptRecord::from(&entry.record))
            .collect()
    };
    let mut records = of_kind(DriftKind::Emergency);
    if all_drift {
        records.extend(of_kind(DriftKind::Manual));
    }
    if !records.is_empty() {
        return Ok(records);
    }
    let manual = of_kind(DriftKind::Manual).len();
    if all_drift || manual == 0 {
        Err(AdoptError::NoDrift { app: name })
    } else {
        Err(AdoptError::NoEmergencyDrift { app: name, manual })
    }
}

/// The changes a break-glass window recorded, one record per object with
/// the union of its fields (the newest record of a field wins). The live
/// values are read again when adopting.
pub fn records_of_window(window: &BreakGlass) -> Vec<AdoptRecord> {
    let mut records: Vec<AdoptRecord> = Vec::new();
    let recorded = window
        .status
        .as_ref()
        .map(|s| s.records.as_slice())
        .unwrap_or_default();
    for entry in recorded {
        let index = match records.iter().position(|r| r.object == entry.object) {
            Some(index) => index,
            None => {
                records.push(AdoptRecord {
                    object: entry.object.clone(),
                    fields: Vec::new(),
                });
                records.len() - 1
            }
        };
        let fields = &mut records[index].fields;
        for field in &entry.fields {
            fields.retain(|f| f.path != field.path);
            fields.push(field.clone());
        }
    }
    records
}

/// The commit subject for adopting a window's changes: its reason, who
/// opened it and the window's name.
pub fn window_reason(window: &BreakGlass) -> String {
    format!(
        "{} (break-glass {} opened by {})",
        window.spec.reason,
        window.metadata.name.as_deref().unwrap_or_default(),
        window.spec.opened_by.username
    )
}

/// The default reason when the operator gives none.
pub fn default_reason(app: &Application, records: &[AdoptRecord]) -> String {
    let objects: Vec<String> = records.iter().map(|r| r.object.to_string()).collect();
    format!(
        "changes made live to {} of Application {}",
        objects.join(", "),
        app.metadata.name.as_deref().unwrap_or_default()
    )
}

/// Reads the current live value of every field of `records` and commits
/// them into `app`'s source as one commit giving `reason`.
pub async fn adopt_records(
    client: Client,
    app: &Application,
    records: &[AdoptRecord],
    reason: &str,
    options: &AdoptOptions,
) -> Result<Adopted, AdoptError> {
    let mut objects: Vec<Adoption> = records
        .iter()
        .map(|record| Adoption {
            object: record.object.clone(),
            fields: record
                .fields
                .iter()
                .map(|field| AdoptedField {
                    path: field.path.clone(),
                    desired: field.desired.clone(),
                    live: field.live.clone(),
                })
                .collect(),
        })
        .collect();
    // Refuse Secrets and empty input before reading anything live.
    source_adopt::write::check(&objects)?;
    // Read the live values now.
    let destination = app.spec.destination.namespace.clone();
    let applier = Applier::new(Resources::new(client.clone()), destination.clone());
    for (adoption, record) in objects.iter_mut().zip(records) {
        let live = live_object(&client, &applier, app, &adoption.object).await?;
        for (field, drifted) in adoption.fields.iter_mut().zip(&record.fields) {
            field.live = live_value(&live, &field.path, &drifted.pointer);
        }
    }
    // Write them into Git.
    let source = app.spec.adopt_source().clone();
    let reason = reason.to_string();
    let options = options.clone();
    tokio::task::spawn_blocking(move || {
        source_adopt::adopt(&Request {
            source: &source,
            default_namespace: &destination,
            objects: &objects,
            reason: &reason,
            author: &options.author,
            branch: options.branch.as_deref(),
            credentials: options.credentials.as_ref(),
            sandbox: &options.sandbox,
        })
    })
    .await
    .map_err(|e| AdoptError::Join(e.to_string()))?
    .map_err(AdoptError::from)
}

/// A field's value in the live object: found by its path (list elements
/// by key, robust to reordering), else by the recorded pointer.
fn live_value(live: &Value, path: &str, pointer: &str) -> Option<Value> {
    match Selector::parse(path) {
        Ok(selector) => selector.get(live).cloned(),
        Err(_) => live.pointer(pointer).cloned(),
    }
}

async fn live_object(
    client: &Client,
    applier: &Applier,
    app: &Application,
    object: &ObjectRef,
) -> Result<Value, AdoptError> {
    let api_version = api_version(client, app, object).await?;
    let mut stub = json!({
        "apiVersion": api_version,
        "kind": object.kind,
        "metadata": {"name": object.name},
    });
    if let Some(namespace) = &object.namespace {
        stub["metadata"]["namespace"] = json!(namespace);
    }
    applier.get(&stub).await?.ok_or_else(|| AdoptError::Gone {
        object: object.clone(),
    })
}

/// The object's apiVersion: from the app's inventory, else the version
/// the API server recommends for its group.
async fn api_version(
    client: &Client,
    app: &Application,
    object: &ObjectRef,
) -> Result<String, AdoptError> {
    let joined = |version: &str| {
        if object.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", object.group)
        }
    };
    let inventory = app.inventory();
    if let Some(entry) = inventory.iter().find(|entry| {
        entry.group == object.group
            && entry.kind == object.kind
            && entry.name == object.name
            && entry.namespace == object.namespace
    }) {
        return Ok(joined(&entry.version));
    }
    let group = kube::discovery::group(client, &object.group)
        .await
        .map_err(|e| AdoptError::UnknownKind {
            object: object.clone(),
            reason: e.to_string(),
        })?;
    let (resource, _) =
        group
            .recommended_kind(&object.kind)
            .ok_or_else(|| AdoptError::UnknownKind {
                object: object.clone(),
                reason: format!(
                    "the API server serves no kind {} in this group",
                    object.kind
                ),
            })?;
    Ok(joined(&resource.version))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::application::{Destination, DriftEntry};
    use crate::api::{ApplicationSpec, ApplicationStatus};

    fn app(kinds: &[DriftKind]) -> Application {
        let mut app = Application::new(
            "shop",
            ApplicationSpec {
                source: Default::default(),
                sources: Vec::new(),
                destination: Destination {
                    namespace: "shop".into(),
                    ..Default::default()
                },
                service_account_name: None,
                project: None,
                depends_on: Vec::new(),
                sync_policy: Default::default(),
                ignore_differences: Vec::new(),
                health: Default::default(),
                pin: None,
            },
        );
        app.metadata.namespace = Some("tether-system".into());
        let drift = kinds
            .iter()
            .enumerate()
            .map(|(n, kind)| DriftEntry {
                record: DriftRecord {
                    object: ObjectRef {
                        group: "apps".into(),
                        kind: "Deployment".into(),
                        namespace: Some("shop".into()),
                        name: format!("web-{n}"),
                    },
                    kind: *kind,
                    fields: vec![DriftedField {
                        path: "spec.replicas".into(),
                        pointer: "/spec/replicas".into(),
                        desired: Some(json!(1)),
                        live: Some(json!(2)),
                        writer: None,
                    }],
                    detected_at: "2026-01-01T00:00:00Z".into(),
                },
                response: tether_core::drift::DriftOutcome::Reported,
                resolved_at: None,
            })
            .collect();
        app.status = Some(ApplicationStatus {
            drift,
            ..Default::default()
        });
        app
    }

    #[test]
    fn emergency_drift_is_adopted_and_manual_drift_only_when_asked() {
        let mixed = app(&[
            DriftKind::Manual,
            DriftKind::Emergency,
            DriftKind::Accidental,
        ]);
        let names = |records: Vec<AdoptRecord>| -> Vec<String> {
            records.into_iter().map(|r| r.object.name).collect()
        };
        assert_eq!(names(records_to_adopt(&mixed, false).unwrap()), ["web-1"]);
        assert_eq!(
            names(records_to_adopt(&mixed, true).unwrap()),
            ["web-1", "web-0"]
        );
    }

    #[test]
    fn without_emergency_drift_the_error_says_what_there_is() {
        let manual = app(&[DriftKind::Manual]);
        assert_eq!(
            records_to_adopt(&manual, false).unwrap_err().to_string(),
            "tether-system/shop: no emergency drift to adopt (pass --all-drift to adopt Manual drift: 1 object(s))"
        );
        assert_eq!(records_to_adopt(&manual, true).unwrap().len(), 1);
        assert_eq!(
            records_to_adopt(&app(&[]), true).unwrap_err().to_string(),
            "tether-system/shop: no drift to adopt"
        );
    }

    #[test]
    fn live_values_are_found_by_key_before_position() {
        let live = json!({"spec": {"containers": [{"name": "side", "image": "s"}, {"name": "app", "image": "a:2"}]}});
        let value = live_value(
            &live,
            "spec.containers[name=app].image",
            "/spec/containers/0/image",
        );
        assert_eq!(value, Some(json!("a:2")));
        assert_eq!(live_value(&live, "spec.missing", "/spec/missing"), None);
    }
}
