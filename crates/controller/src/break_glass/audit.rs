//! The append-only audit log of changes made inside break-glass windows.
//!
//! Where it lives, and why: each record is an **immutable ConfigMap** in
//! the window's namespace (`<window>-audit-<sequence>`, `immutable: true`),
//! labelled with the window's uid. It is in etcd, so it survives a
//! controller restart or a move to another replica (a file on the
//! controller's disk would not; Events expire after an hour; the window's
//! status is bounded). The API server itself refuses any change to an
//! immutable ConfigMap, so a record can only be added, never edited; each
//! record carries the SHA-256 chain digest of all records before it, so a
//! deleted or replaced record shows as a break in the chain. It has no
//! owner reference: deleting the window does not delete its trail, and
//! Tether never deletes either. The window's status keeps the newest
//! records, the count and the last digest.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tether_core::ObjectRef;
use tether_core::drift::DriftedField;
use tether_core::window::{chain_digest, is_new_change};

use crate::api::BreakGlass;
use crate::api::break_glass::{EmergencyRecord, RECORDS_IN_STATUS};

/// Label on audit records: the window's uid.
pub const WINDOW_UID_LABEL: &str = "tether.dev/break-glass-uid";
/// Annotation on audit records: the chain digest up to and including it.
pub const DIGEST_ANNOTATION: &str = "tether.dev/audit-digest";
/// The key of the record in the ConfigMap's data.
pub const RECORD_KEY: &str = "record.json";
/// Field manager of the window status fields the audit log writes.
const MANAGER: &str = "tether-audit";

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
        let mut last = HashMap::new();
        for record in &status.records {
            last.insert(record.object.clone(), record.fields.clone());
        }
        Chain {
            count: status.record_count,
            digest: status.audit_digest,
            records: status.records,
            last,
        }
    }
}

/// The audit log of every window this controller records into.
#[derive(Default)]
pub struct AuditLog {
    chains: Mutex<HashMap<String, Chain>>,
}

/// One change to record.
pub struct Change<'a> {
    pub app: &'a str,
    pub object: &'a ObjectRef,
    pub fields: &'a [DriftedField],
    pub recorded_at: &'a str,
}

impl AuditLog {
    /// Appends `change` to `window`'s log unless the window already holds
    /// this very change; returns the record when one was written.
    pub async fn record(
        &self,
        client: &Client,
        window: &BreakGlass,
        change: &Change<'_>,
    ) -> Result<Option<EmergencyRecord>, kube::Error> {
        let uid = window.uid().unwrap_or_default();
        let chain = self
            .chains
            .lock()
            .expect("lock")
            .entry(uid.clone())
            .or_insert_with(|| Chain::from_status(window))
            .clone();
        if !is_new_change(
            chain.last.get(change.object).map(Vec::as_slice),
            change.fields,
        ) {
            return Ok(None);
        }
        let namespace = window.namespace().unwrap_or_default();
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
        let chain = match append(&configmaps, window, &chain, change).await {
            Ok(chain) => chain,
            // The status lagged behind the log (a restart between the two
            // writes): catch up from the log itself, then append.
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let caught_up = catch_up(&configmaps, &uid, chain).await?;
                append(&configmaps, window, &caught_up, change).await?
            }
            Err(error) => return Err(error),
        };
        write_status(client, window, &chain).await?;
        let record = chain.records.last().cloned();
        self.chains.lock().expect("lock").insert(uid, chain);
        Ok(record)
    }
}

/// Creates the next audit record; returns the chain with it.
async fn append(
    configmaps: &Api<ConfigMap>,
    window: &BreakGlass,
    chain: &Chain,
    change: &Change<'_>,
) -> Result<Chain, kube::Error> {
    let sequence = chain.count + 1;
    let window_name = window.name_any();
    let body = json!({
        "sequence": sequence,
        "window": window_name,
        "application": change.app,
        "reason": window.spec.reason,
        "openedBy": window.spec.opened_by.username,
        "kind": "Emergency",
        "object": change.object,
        "fields": change.fields,
        "recordedAt": change.recorded_at,
        "previousDigest": chain.digest,
    });
    let bytes = serde_json::to_vec_pretty(&body).expect("a record serializes");
    let digest = chain_digest(&chain.digest, &bytes);
    let name = format!("{window_name}-audit-{sequence:05}");
    let configmap = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([(
                WINDOW_UID_LABEL.to_string(),
                window.uid().unwrap_or_default(),
            )])),
            annotations: Some(BTreeMap::from([
                (DIGEST_ANNOTATION.to_string(), digest.clone()),
                ("tether.dev/break-glass".to_string(), window_name),
            ])),
            ..ObjectMeta::default()
        },
        immutable: Some(true),
        data: Some(BTreeMap::from([(
            RECORD_KEY.to_string(),
            String::from_utf8(bytes).expect("JSON is UTF-8"),
        )])),
        ..ConfigMap::default()
    };
    configmaps
        .create(&PostParams::default(), &configmap)
        .await?;
    let record = EmergencyRecord {
        sequence,
        object: change.object.clone(),
        fields: change.fields.to_vec(),
        recorded_at: change.recorded_at.to_string(),
        audit: name,
    };
    let mut next = chain.clone();
    next.count = sequence;
    next.digest = digest;
    next.last
        .insert(change.object.clone(), change.fields.to_vec());
    next.records.push(record);
    let excess = next.records.len().saturating_sub(RECORDS_IN_STATUS);
    next.records.drain(..excess);
    Ok(next)
}

/// The chain after the records the log holds beyond what status knew.
async fn catch_up(
    configmaps: &Api<ConfigMap>,
    uid: &str,
    mut chain: Chain,
) -> Result<Chain, kube::Error> {
    let logged = configmaps
        .list(&ListParams::default().labels(&format!("{WINDOW_UID_LABEL}={uid}")))
        .await?;
    for configmap in logged.items {
        let Some(text) = configmap.data.as_ref().and_then(|d| d.get(RECORD_KEY)) else {
            continue;
        };
        let Ok(record) = serde_json::from_str::<serde_json::Value>(text) else {
            continue;
        };
        let sequence = record["sequence"].as_u64().unwrap_or_default();
        if sequence <= chain.count {
            continue;
        }
        chain.count = sequence;
        chain.digest = configmap
            .annotations()
            .get(DIGEST_ANNOTATION)
            .cloned()
            .unwrap_or_default();
        if let (Ok(object), Ok(fields)) = (
            serde_json::from_value::<ObjectRef>(record["object"].clone()),
            serde_json::from_value::<Vec<DriftedField>>(record["fields"].clone()),
        ) {
            chain.last.insert(object, fields);
        }
    }
    Ok(chain)
}

async fn write_status(
    client: &Client,
    window: &BreakGlass,
    chain: &Chain,
) -> Result<(), kube::Error> {
    let api: Api<BreakGlass> =
        Api::namespaced(client.clone(), &window.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": "tether.dev/v1alpha1",
        "kind": "BreakGlass",
        "status": {
            "records": chain.records,
            "recordCount": chain.count,
            "auditDigest": chain.digest,
        }
    });
    api.patch_status(
        &window.name_any(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// The audit records of a window, oldest first, each checked against the
/// chain: `Err` names the first record whose digest does not follow.
pub async fn read(
    client: &Client,
    window: &BreakGlass,
) -> Result<Result<Vec<serde_json::Value>, String>, kube::Error> {
    let configmaps: Api<ConfigMap> =
        Api::namespaced(client.clone(), &window.namespace().unwrap_or_default());
    let uid = window.uid().unwrap_or_default();
    let mut logged = configmaps
        .list(&ListParams::default().labels(&format!("{WINDOW_UID_LABEL}={uid}")))
        .await?
        .items;
    logged.sort_by_key(|c| c.name_any());
    let mut digest = String::new();
    let mut records = Vec::new();
    for configmap in logged {
        let text = configmap
            .data
            .as_ref()
            .and_then(|d| d.get(RECORD_KEY))
            .cloned()
            .unwrap_or_default();
        let expected = chain_digest(&digest, text.as_bytes());
        let recorded = configmap.annotations().get(DIGEST_ANNOTATION).cloned();
        if recorded.as_deref() != Some(expected.as_str()) {
            return Ok(Err(format!(
                "ConfigMap {}/{}: the audit chain breaks here (a record before it was changed or removed)",
                configmap.namespace().unwrap_or_default(),
                configmap.name_any()
            )));
        }
        digest = expected;
        records.push(serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)));
    }
    Ok(Ok(records))
}
