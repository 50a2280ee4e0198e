//! An Application's observed state, written by Tether through the status
//! subresource: sync and health, per-object status, drift and orphans on
//! record, the operation and its history, conditions.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tether_core::attribution::OtherWriter;
use tether_core::drift::DriftOutcome;
use tether_core::drift::DriftRecord;
use tether_core::hook::{HookOutcome, HookPhase};
use tether_core::prune::PruneFate;
use tether_core::{
    Action, ConditionStatus, HealthStatus, Initiator, OperationPhase, OperationalState, SyncStatus,
};

use crate::api::inventory::InventoryEntry;
use crate::api::schema::{open_object_list, word};

/// Observed state, written by Tether through the status subresource.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationStatus {
    #[serde(default)]
    pub sync: SyncInfo,
    #[serde(default)]
    pub health: HealthInfo,
    /// The operational state named by the Synced × Healthy matrix:
    /// Converged, AppliedButFailing, DriftedOrPending or Broken.
    // Optional: a schema of its own does not say so.
    #[serde(default)]
    #[schemars(schema_with = "word::<OperationalState>")]
    pub state: Option<OperationalState>,
    /// The Project that holds the app, as the controller last judged it;
    /// absent while no Project applies to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The Kubernetes user the app's changes are made as
    /// (`system:serviceaccount:NS:NAME`); absent for the controller's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applies_as: Option<String>,
    /// The controller replica that last reconciled the app (its identity
    /// in the shard Leases); set when the controller runs sharded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// Sync and health per object: every object that is not Synced and
    /// Healthy, then the others, at most 200 (`resourceCount` has them all;
    /// the inventory lists every object).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceStatus>,
    /// How many objects the app has; more than `resources` lists when
    /// that list is cut.
    pub resource_count: Option<usize>,
    /// Objects that differ from Git now, by kind (Manual, Accidental,
    /// Emergency), with the fields and their writers; at most 50.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "open_object_list")]
    pub drift: Vec<DriftEntry>,
    /// Recently resolved drift (reverted or gone), newest first; at most 10.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "open_object_list")]
    pub last_drift: Vec<DriftEntry>,
    /// Field managers other than Tether that still own fields of managed
    /// objects — "the controller is the only writer" audited: object,
    /// manager, operation, subresource, time, how many fields and the first
    /// of them. Most recent first; at most 20. A writer whose every field
    /// was reverted no longer owns any and drops off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "open_object_list")]
    pub other_writers: Vec<OtherWriterEntry>,
    /// Objects of the inventory that Git no longer has, and their fate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orphans: Vec<OrphanStatus>,
    /// Every object Tether applied for this app (prune's source of truth);
    /// stored grouped by group, version, kind and namespace, so that it is
    /// complete however many objects the app has.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "crate::api::inventory"
    )]
    #[schemars(schema_with = "crate::api::inventory::schema")]
    pub inventory: Vec<InventoryEntry>,
    /// Objects the API server named (`generateName`): the name and UID each
    /// desired object got when Tether created it, once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generated: Vec<GeneratedEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    pub operation_state: Option<OperationState>,
    /// The last 10 syncs, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryEntry>,
    pub observed_generation: Option<i64>,
    pub reconciled_at: Option<String>,
}

/// Does live match Git, and at which revision?
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncInfo {
    /// Synced, OutOfSync or Unknown.
    #[serde(default)]
    #[schemars(schema_with = "word::<SyncStatus>")]
    pub status: SyncStatus,
    /// The commit live state was last synced to.
    pub revision: Option<String>,
    /// The commit (and path tree) live state was last compared with.
    pub compared_to: Option<String>,
    /// SHA-256 of the rendered objects synced at `revision`: a later commit
    /// rendering the same objects (a change elsewhere in a monorepo) is
    /// recorded as the synced revision without a sync.
    pub objects_digest: Option<String>,
    /// Since when (RFC 3339) the app has not been Synced — out of sync,
    /// or a step of its reconcile failing; absent while it is Synced. Kept
    /// across controller restarts, so the `NotSyncedTooLong` alert counts
    /// from the first reconcile that found it so.
    pub not_synced_since: Option<String>,
    /// What each source resolved to when live state was last compared (a
    /// chart's version and digest, a Git source's commit and path tree),
    /// in the order of `spec.sources`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceStatus>,
}

/// One source's resolved revision.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// Its chart name, for a chart source.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub chart: String,
    /// The commit, or the chart version.
    pub revision: String,
    /// The path's tree, or the chart archive's `sha256:` digest.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
}

/// Are the applied objects working?
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthInfo {
    /// Healthy, Progressing, Degraded, Suspended, Missing or Unknown.
    #[serde(default)]
    #[schemars(schema_with = "word::<HealthStatus>")]
    pub status: HealthStatus,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Sync and health of one managed object.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    #[schemars(schema_with = "word::<SyncStatus>")]
    pub sync: SyncStatus,
    pub health: Option<HealthInfo>,
    /// A one-line drift summary: which fields differ and who wrote them.
    pub drift: Option<String>,
}

/// A drift record (see `tether_core::drift::DriftRecord`) and what Tether
/// did about it.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DriftEntry {
    #[serde(flatten)]
    pub record: DriftRecord,
    /// Healed (reverted), Reported (warn mode, self-heal off or opted out)
    /// or BackedOff (the flap guard stopped reverting).
    pub response: DriftOutcome,
    /// When the drift was reverted (or otherwise resolved).
    pub resolved_at: Option<String>,
}

/// Another writer of one managed object.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OtherWriterEntry {
    /// `Kind namespace/name`.
    pub object: String,
    #[serde(flatten)]
    pub writer: OtherWriter,
}

/// An object in the inventory that Git no longer has.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrphanStatus {
    /// `Kind namespace/name`.
    pub object: String,
    /// Deleted, or why it is kept.
    #[schemars(with = "String")]
    pub prune: PruneFate,
}

/// An object the API server named (`generateName`), created once for the
/// desired content its key stands for (`tether_core::generated`).
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeneratedEntry {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub generate_name: String,
    /// The key of the desired content (`tether.dev/generated-from`).
    pub key: String,
    /// The name the API server gave it.
    pub name: String,
    pub uid: String,
}

/// A condition in the Kubernetes convention; one reason per failing step
/// (FetchFailed, VerifyFailed, RenderFailed, DiffFailed, ValidationFailed,
/// ApplyFailed …).
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    #[schemars(schema_with = "word::<ConditionStatus>")]
    pub status: ConditionStatus,
    pub reason: String,
    #[serde(default)]
    pub message: String,
    pub last_transition_time: Option<String>,
}

/// The condition of `type_` in `conditions`, if reported.
pub fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The condition of `type_` in `conditions` if its status is `status`.
pub fn condition_with<'a>(
    conditions: &'a [Condition],
    type_: &str,
    status: ConditionStatus,
) -> Option<&'a Condition> {
    condition(conditions, type_).filter(|c| c.status == status)
}

/// Whether condition `type_` of `conditions` is `True`.
pub fn holds(conditions: &[Condition], type_: &str) -> bool {
    condition_with(conditions, type_, ConditionStatus::True).is_some()
}

/// Sets condition `type_` of `conditions` to `value`, for `reason`; its
/// transition time moves to `now` only when `value` changes (or the
/// condition is new).
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    value: ConditionStatus,
    reason: &str,
    message: String,
    now: &str,
) {
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if existing.status != value {
            existing.last_transition_time = Some(now.to_string());
        }
        existing.status = value;
        existing.reason = reason.into();
        existing.message = message;
        return;
    }
    conditions.push(Condition {
        type_: type_.into(),
        status: value,
        reason: reason.into(),
        message,
        last_transition_time: Some(now.to_string()),
    });
}

/// The last (or running) sync operation.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationState {
    /// Running, Succeeded or Failed.
    #[schemars(schema_with = "word::<OperationPhase>")]
    pub phase: OperationPhase,
    #[serde(default)]
    pub message: String,
    pub revision: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// What the sync did to each object (for a failed sync: what it had
    /// applied before it stopped half-way): changes first, `unchanged`
    /// last, at most 200.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    /// Outcomes left out of `changes` to keep status small.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub changes_omitted: usize,
    /// Set while a sync with `waitForWaves` waits for a wave to become
    /// healthy, or while a hook runs: the sync resumes at the next
    /// reconcile (no worker is held meanwhile), and gives up
    /// `waveTimeoutSeconds` (a hook: its `tether.dev/hook-timeout`) after
    /// `since`.
    pub waiting: Option<WaveWait>,
    /// The sync hooks this operation ran, in the order they ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookRun>,
}

/// One sync hook of an operation (`tether_core::hook`).
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookRun {
    /// `Kind namespace/name`, as created.
    pub name: String,
    /// The `metadata.generateName` it was created from, if any.
    pub generate_name: Option<String>,
    #[schemars(schema_with = "word::<HookPhase>")]
    pub phase: HookPhase,
    /// Running, Succeeded or Failed.
    #[schemars(schema_with = "word::<HookOutcome>")]
    pub outcome: HookOutcome,
    /// Why it failed, or what it is doing while it runs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    pub started_at: String,
    pub finished_at: Option<String>,
}

/// The wave a running sync waits for.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaveWait {
    /// The wave applied and not yet healthy.
    pub wave: i32,
    /// The first object holding it back, and its health.
    pub object: String,
    /// When the wait began (RFC 3339).
    pub since: String,
    /// Set when it is a hook that runs, not a wave: the hook's phase
    /// (`wave` is then 0 and means nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_hook_phase")]
    pub hook: Option<HookPhase>,
}

fn optional_hook_phase(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    word::<HookPhase>(generator)
}

/// One object's outcome in a sync.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// `Kind namespace/name`.
    pub object: String,
    #[schemars(schema_with = "word::<Action>")]
    pub action: Action,
}

/// One past sync.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// The entry's number, one more than the newest before it
    /// (`tether rollback --to ID`); 0 on entries written before ids.
    #[serde(default, skip_serializing_if = "is_zero_id")]
    pub id: u64,
    pub revision: String,
    pub time: String,
    /// Who or what started it: `automated`, `self-heal`, `user`,
    /// `rollback` or `unpin`.
    #[schemars(schema_with = "word::<Initiator>")]
    pub initiator: Initiator,
    /// The sync hooks it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookRun>,
    /// Who rolled back (or lifted a pin), for `rollback` and `unpin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Why: the rollback's `--reason`, or why a pin was lifted
    /// (`GitMatches`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl HistoryEntry {
    /// The id the next entry of `history` (newest first) gets.
    pub fn next_id(history: &[HistoryEntry]) -> u64 {
        history.iter().map(|entry| entry.id).max().unwrap_or(0) + 1
    }
}

fn is_zero_id(id: &u64) -> bool {
    *id == 0
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
