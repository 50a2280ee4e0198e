//! The append-only audit log of changes made inside break-glass windows.
//!
//! Where it lives, and why: each record is an **immutable ConfigMap in the
//! controller's namespace** (the `--lease-namespace`, `tether-system` by
//! default), named after the window's uid (`audit-<uid>-<sequence>`, so
//! windows of different namespaces never collide) and labelled with the
//! window's uid and namespace. Tenants cannot write there (RBAC), and the
//! admission policy `tether-audit-records` that `tether install` adds lets
//! nobody create a record outside a controller namespace, nor change or
//! delete one (short of deleting the whole namespace). It is in etcd, so it
//! survives a controller restart or a move to another replica. It has no
//! owner reference: deleting the window does not delete its trail.
//!
//! Each record is sealed with an HMAC-SHA256 under the controller's key
//! ([`super::key`]) over the seal before it and its own bytes
//! ([`tether_core::audit`]): a record added or replaced by anyone without
//! the key does not verify, and a removed one leaves a gap in the sequence
//! or against the count the window's status keeps. The controller checks
//! each window's log whenever the window or one of its records changes and
//! writes the verdict to `status.auditChain` (with a warning Event when the
//! log is broken); `tether break-glass show` prints it next to its own
//! key-less check of the sequence.
//!
//! Records written before records were keyed stay where they were, in the
//! window's namespace with a plain SHA-256 digest: they are read, checked
//! as far as that goes and reported as `Unkeyed`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tether_core::ObjectRef;
use tether_core::audit::{ChainReport, Seal, StoredRecord, chain_mac, verify};
use tether_core::drift::DriftedField;
use tether_core::window::new_fields;

use super::key::AuditKey;
use crate::api::BreakGlass;
use crate::api::break_glass::{AuditChainStatus, EmergencyRecord, RECORDS_IN_STATUS};

/// Label on audit records: the window's uid.
pub const WINDOW_UID_LABEL: &str = "tether.dev/break-glass-uid";
/// Label on audit records: the window's namespace.
pub const WINDOW_NAMESPACE_LABEL: &str = "tether.dev/break-glass-namespace";
/// Label on audit records: the window's name (when it fits in a label).
pub const WINDOW_NAME_LABEL: &str = "tether.dev/break-glass-name";
/// Annotation on audit records: `namespace/name` of the window.
pub const WINDOW_ANNOTATION: &str = "tether.dev/break-glass";
/// Annotation on audit records: the keyed seal up to and including it.
pub const MAC_ANNOTATION: &str = "tether.dev/audit-mac";
/// Annotation on records from before keying: the unkeyed chain digest.
pub const LEGACY_DIGEST_ANNOTATION: &str = "tether.dev/audit-digest";
/// The key of the record in the ConfigMap's data.
pub const RECORD_KEY: &str = "record.json";
/// Field manager of the window status fields the audit log writes.
const MANAGER: &str = "tether-audit";
/// Field manager of the verdict on the window's log.
const CHECK_MANAGER: &str = "tether-audit-check";

/// Why a change could not be recorded; retried on the next reconcile.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("BreakGlass {window}: writing its audit log: {}", tether_cluster::error::describe(.error))]
    Kube { window: String, error: kube::Error },
    #[error(
        "BreakGlass {window}: the audit log cannot grow past sequence {count} (status.recordCount)"
    )]
    Full { window: String, count: u64 },
}

/// Where one window's log stands.
#[derive(Debug, Clone, Default)]
struct Chain {
    count: u64,
    digest: String,
    records: Vec<EmergencyRecord>,
    last: HashMap<ObjectRef, Vec<DriftedField>>,
}

impl Chain {
    /// The chain as the window's status recorded it.
    fn from_status(window: &BreakGlass) -> Chain {
        let status = window.status.clone().unwrap_or_default();
        let mut last: HashMap<ObjectRef, Vec<DriftedField>> = HashMap::new();
        for record in &status.records {
            let known = last.entry(record.object.clone()).or_default();
            for field in &record.fields {
                known.retain(|seen| seen.path != field.path);
                known.push(field.clone());
            }
        }
        Chain {
            count: status.record_count,
            digest: status.audit_digest,
            records: status.records,
            last,
        }
    }

    /// The chain with `record` appended.
    fn push(&mut self, sequence: u64, seal: String, record: EmergencyRecord) {
        self.count = sequence;
        self.digest = seal;
        let known = self.last.entry(record.object.clone()).or_default();
        for field in &record.fields {
            known.retain(|seen| seen.path != field.path);
            known.push(field.clone());
        }
        self.records.push(record);
        let excess = self.records.len().saturating_sub(RECORDS_IN_STATUS);
        self.records.drain(..excess);
    }
}

/// The audit log of every window this controller records into.
pub struct AuditLog {
    /// The controller's namespace, where records are written.
    namespace: String,
    key: AuditKey,
    chains: Mutex<HashMap<String, Chain>>,
}

/// One change to record.
pub struct Change<'a> {
    pub app: &'a str,
    pub object: &'a ObjectRef,
    pub fields: &'a [DriftedField],
    pub recorded_at: &'a str,
}

impl<'a> Change<'a> {
    /// This change with only `fields`.
    fn with<'b>(&self, fields: &'b [DriftedField]) -> Change<'b>
    where
        'a: 'b,
    {
        Change { fields, ..*self }
    }
}

impl AuditLog {
    /// A log writing into `namespace` (the controller's), sealed with `key`.
    pub fn new(namespace: &str, key: AuditKey) -> AuditLog {
        AuditLog {
            namespace: namespace.to_string(),
            key,
            chains: Mutex::default(),
        }
    }

    /// Appends the part of `change` that `window`'s log does not hold yet
    /// (the fields whose live value it has not recorded); returns the
    /// record when one was written.
    pub async fn record(
        &self,
        client: &Client,
        window: &BreakGlass,
        change: &Change<'_>,
    ) -> Result<Option<EmergencyRecord>, AuditError> {
        let Some(uid) = window.uid() else {
            return Ok(None);
        };
        let name = window_name(window);
        let failed = |error| AuditError::Kube {
            window: name.clone(),
            error,
        };
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &self.namespace);
        let known = self.chains.lock().expect("lock").get(&uid).cloned();
        let chain = match known {
            Some(chain) => chain,
            // First use in this process: the status may lag behind the log
            // (a restart between writing a record and the status).
            None => catch_up(&configmaps, &uid, &self.key, Chain::from_status(window))
                .await
                .map_err(failed)?,
        };
        let fresh = new_fields(
            chain.last.get(change.object).map(Vec::as_slice),
            change.fields,
        );
        if fresh.is_empty() {
            self.chains.lock().expect("lock").insert(uid, chain);
            return Ok(None);
        }
        let chain = match self
            .append(&configmaps, window, &chain, &change.with(&fresh), false)
            .await
        {
            // The name is taken: another writer got there first (catch up,
            // then append), or someone put a record there by hand (it does
            // not verify, so nothing is caught up: append under a name of
            // this record's own, which nobody without the key can know in
            // advance; the check reports the squatter).
            Err(AuditError::Kube {
                error: kube::Error::Api(status),
                ..
            }) if status.code == 409 => {
                let caught_up = catch_up(&configmaps, &uid, &self.key, chain.clone())
                    .await
                    .map_err(failed)?;
                let squatted = caught_up.count == chain.count;
                let known = caught_up.last.get(change.object).map(Vec::as_slice);
                let fresh = if squatted {
                    fresh
                } else {
                    new_fields(known, change.fields)
                };
                if fresh.is_empty() {
                    self.chains.lock().expect("lock").insert(uid, caught_up);
                    return Ok(None);
                }
                self.append(
                    &configmaps,
                    window,
                    &caught_up,
                    &change.with(&fresh),
                    squatted,
                )
                .await?
            }
            other => other?,
        };
        write_status(client, window, &chain).await.map_err(failed)?;
        let record = chain.records.last().cloned();
        self.chains.lock().expect("lock").insert(uid, chain);
        Ok(record)
    }

    /// Creates the next audit record (`audit-<uid>-<sequence>`, with the
    /// start of its seal appended when `unpredictable`); returns the chain
    /// with it.
    async fn append(
        &self,
        configmaps: &Api<ConfigMap>,
        window: &BreakGlass,
        chain: &Chain,
        change: &Change<'_>,
        unpredictable: bool,
    ) -> Result<Chain, AuditError> {
        let sequence = chain.count.checked_add(1).ok_or(AuditError::Full {
            window: window_name(window),
            count: chain.count,
        })?;
        let text = record_text(window, chain, change, sequence);
        let seal = chain_mac(self.key.bytes(), &chain.digest, text.as_bytes());
        let uid = window.uid().unwrap_or_default();
        let mut name = format!("audit-{uid}-{sequence:05}");
        if unpredictable {
            name = format!("{name}-{}", seal.get(..8).unwrap_or_default());
        }
        let configmap = record_configmap(window, &name, &seal, text);
        configmaps
            .create(&PostParams::default(), &configmap)
            .await
            .map_err(|error| AuditError::Kube {
                window: window_name(window),
                error,
            })?;
        let mut next = chain.clone();
        next.push(
            sequence,
            seal,
            EmergencyRecord {
                sequence,
                object: change.object.clone(),
                fields: change.fields.to_vec(),
                recorded_at: change.recorded_at.to_string(),
                audit: name,
            },
        );
        Ok(next)
    }
}

/// The text of audit record `sequence` of `window`: `change`, whose
/// window it was made in and why, and the digest of the record before it.
fn record_text(window: &BreakGlass, chain: &Chain, change: &Change<'_>, sequence: u64) -> String {
    let body = json!({
        "sequence": sequence,
        "window": window.name_any(),
        "windowNamespace": window.namespace().unwrap_or_default(),
        "windowUid": window.uid().unwrap_or_default(),
        "application": change.app,
        "reason": window.spec.reason,
        "openedBy": window.spec.opened_by.username,
        "kind": tether_core::drift::DriftKind::Emergency,
        "object": change.object,
        "fields": change.fields,
        "recordedAt": change.recorded_at,
        "previousDigest": chain.digest,
    });
    serde_json::to_string_pretty(&body).expect("a JSON value serializes")
}

/// The immutable ConfigMap `name` that holds record `text`, sealed with
/// `seal`, labelled with its window's uid, namespace and (when it fits in
/// a label) name.
fn record_configmap(window: &BreakGlass, name: &str, seal: &str, text: String) -> ConfigMap {
    let namespace = window.namespace().unwrap_or_default();
    let mut labels = BTreeMap::from([
        (
            WINDOW_UID_LABEL.to_string(),
            window.uid().unwrap_or_default(),
        ),
        (WINDOW_NAMESPACE_LABEL.to_string(), namespace.clone()),
    ]);
    // A label value holds at most 63 characters; the annotation always
    // names the window.
    if window.name_any().len() <= 63 {
        labels.insert(WINDOW_NAME_LABEL.to_string(), window.name_any());
    }
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                (MAC_ANNOTATION.to_string(), seal.to_string()),
                (
                    WINDOW_ANNOTATION.to_string(),
                    format!("{namespace}/{}", window.name_any()),
                ),
            ])),
            ..ObjectMeta::default()
        },
        immutable: Some(true),
        data: Some(BTreeMap::from([(RECORD_KEY.to_string(), text)])),
        ..ConfigMap::default()
    }
}

fn window_name(window: &BreakGlass) -> String {
    format!(
        "{}/{}",
        window.namespace().unwrap_or_default(),
        window.name_any()
    )
}

/// The chain after the records the log holds beyond what `chain` knew:
/// only records that follow it (the next sequence, naming its seal) and
/// verify under `key`; anything else is left for the check to report.
async fn catch_up(
    configmaps: &Api<ConfigMap>,
    uid: &str,
    key: &AuditKey,
    mut chain: Chain,
) -> Result<Chain, kube::Error> {
    let logged = configmaps
        .list(&ListParams::default().labels(&format!("{WINDOW_UID_LABEL}={uid}")))
        .await?;
    let mut verified: BTreeMap<u64, (String, String, Value, String)> = BTreeMap::new();
    for configmap in &logged.items {
        let (Some(text), Some(seal)) = (
            configmap.data.as_ref().and_then(|d| d.get(RECORD_KEY)),
            configmap.annotations().get(MAC_ANNOTATION),
        ) else {
            continue;
        };
        let Ok(body) = serde_json::from_str::<Value>(text) else {
            continue;
        };
        let (Some(sequence), Some(previous)) =
            (body["sequence"].as_u64(), body["previousDigest"].as_str())
        else {
            continue;
        };
        if *seal == chain_mac(key.bytes(), previous, text.as_bytes()) {
            verified.insert(
                sequence,
                (
                    previous.to_string(),
                    seal.clone(),
                    body,
                    configmap.name_any(),
                ),
            );
        }
    }
    while let Some(next) = chain.count.checked_add(1)
        && let Some((previous, seal, body, name)) = verified.remove(&next)
        && previous == chain.digest
    {
        let object = serde_json::from_value::<ObjectRef>(body["object"].clone());
        let fields = serde_json::from_value::<Vec<DriftedField>>(body["fields"].clone());
        let (Ok(object), Ok(fields)) = (object, fields) else {
            break;
        };
        let record = EmergencyRecord {
            sequence: next,
            object,
            fields,
            recorded_at: body["recordedAt"].as_str().unwrap_or_default().to_string(),
            audit: name,
        };
        chain.push(next, seal, record);
    }
    Ok(chain)
}

async fn write_status(
    client: &Client,
    window: &BreakGlass,
    chain: &Chain,
) -> Result<(), kube::Error> {
    let status = json!({
        "records": chain.records,
        "recordCount": chain.count,
        "auditDigest": chain.digest,
    });
    apply_status(client, window, MANAGER, status).await
}

/// Applies `status` to `window`'s status as field manager `manager` (the
/// records and the verdict have different writers, so neither write
/// removes the other's fields).
async fn apply_status(
    client: &Client,
    window: &BreakGlass,
    manager: &str,
    status: serde_json::Value,
) -> Result<(), kube::Error> {
    let api: Api<BreakGlass> =
        Api::namespaced(client.clone(), &window.namespace().unwrap_or_default());
    let patch =
        json!({"apiVersion": "tether.dev/v1alpha1", "kind": "BreakGlass", "status": status});
    api.patch_status(
        &window.name_any(),
        &PatchParams::apply(manager).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// A window's log as checked: the verdict, and the records' bodies in
/// sequence order (unreadable ones as their text).
#[derive(Debug, Clone)]
pub struct Checked {
    pub report: ChainReport,
    pub records: Vec<Value>,
}

/// Reads and checks `window`'s log: the keyed records in `namespace` (the
/// controller's) and any records from before keying in the window's own
/// namespace. With `key` every seal is verified; without it (the CLI) only
/// the sequence, the links and the count in status.
pub async fn check(
    client: &Client,
    namespace: &str,
    window: &BreakGlass,
    key: Option<&AuditKey>,
) -> Result<Checked, kube::Error> {
    let Some(uid) = window.uid() else {
        return Ok(Checked {
            report: verify(&[], None, 0),
            records: Vec::new(),
        });
    };
    let selector = ListParams::default().labels(&format!("{WINDOW_UID_LABEL}={uid}"));
    let expected = window.status.as_ref().map_or(0, |s| s.record_count);
    let mut stored = stored_records(client, namespace, &selector).await?;
    // Records from before keying stay in the window's namespace: look
    // there only when the keyed ones do not start the chain.
    let first = stored
        .iter()
        .filter_map(|r| serde_json::from_str::<Value>(&r.text).ok()?["sequence"].as_u64())
        .min();
    let window_namespace = window.namespace().unwrap_or_default();
    let before_keying = first.map_or(expected > 0, |first| first > 1);
    if before_keying && window_namespace != namespace {
        let legacy = stored_records(client, &window_namespace, &selector).await?;
        stored.extend(
            legacy
                .into_iter()
                .filter(|r| matches!(r.seal, Seal::Unkeyed(_))),
        );
    }
    let report = verify(&stored, key.map(AuditKey::bytes), expected);
    let mut records: Vec<Value> = stored
        .into_iter()
        .map(|r| serde_json::from_str(&r.text).unwrap_or(Value::String(r.text)))
        .collect();
    records.sort_by_key(|r| r["sequence"].as_u64().unwrap_or(u64::MAX));
    Ok(Checked { report, records })
}

/// The records labelled by `selector` in `namespace`, with their seals.
async fn stored_records(
    client: &Client,
    namespace: &str,
    selector: &ListParams,
) -> Result<Vec<StoredRecord>, kube::Error> {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let listed = configmaps.list(selector).await?.items;
    Ok(listed
        .into_iter()
        .map(|configmap| {
            let annotations = configmap.annotations();
            let seal = match (
                annotations.get(MAC_ANNOTATION),
                annotations.get(LEGACY_DIGEST_ANNOTATION),
            ) {
                (Some(mac), _) => Seal::Keyed(mac.clone()),
                (None, Some(digest)) => Seal::Unkeyed(digest.clone()),
                (None, None) => Seal::Missing,
            };
            StoredRecord {
                name: format!("ConfigMap {namespace}/{}", configmap.name_any()),
                text: configmap
                    .data
                    .as_ref()
                    .and_then(|d| d.get(RECORD_KEY))
                    .cloned()
                    .unwrap_or_default(),
                seal,
            }
        })
        .collect())
}

/// The verdict to keep in the window's status.
pub fn chain_status(namespace: &str, report: &ChainReport) -> AuditChainStatus {
    AuditChainStatus {
        state: report.state,
        message: report.message(),
        namespace: namespace.to_string(),
        records: report.records,
    }
}

/// Writes the verdict on `window`'s log into its status.
pub async fn write_verdict(
    client: &Client,
    window: &BreakGlass,
    verdict: &AuditChainStatus,
) -> Result<(), kube::Error> {
    apply_status(
        client,
        window,
        CHECK_MANAGER,
        json!({"auditChain": verdict}),
    )
    .await
}
