//! The next Application status, computed from what a reconcile saw and did.
//!
//! [`next_status`] is a pure function of the previous status and the
//! reconcile's observations, so "write only when changed" is a comparison of
//! two values, and the whole status is tested without an API server.

use std::time::Duration;
use tether_core::argocd::Warning;
use tether_core::attribution::{Ownership, other_writers};

use tether_core::alert;
use tether_core::drift::{DriftKind, DriftOutcome, drifted_fields};
use tether_core::generated::{generate_name, key_of};
use tether_core::health::{Health, HealthStatus, app_health};
use tether_core::revision::RevisionChange;
use tether_core::{Action, Initiator, ObjectRef, OperationPhase, OperationalState, SyncStatus};

use crate::api::application::{
    ApplicationStatus, Change, Condition, DriftEntry, GeneratedEntry, HealthInfo, HistoryEntry,
    HookRun, InventoryEntry, OperationState, OrphanStatus, OtherWriterEntry, ResourceStatus,
    WaveWait, set_condition,
};
use crate::observe::compare::{Compared, ObjectState};
use crate::observe::drift::{Assessed, Response};
use crate::observe::health::{self, Judge};
use crate::sync::SyncReport;
use crate::sync::prune::PruneReport;

const HISTORY_LIMIT: usize = 10;
/// Deleted orphans still listed in status after they are gone.
const PRUNED_KEPT_ON_RECORD: usize = 20;
const DRIFT_LIMIT: usize = 50;
const LAST_DRIFT_LIMIT: usize = 10;
pub use crate::api::application::{
    BACK_OFF_CONDITION, NOT_SYNCED_TOO_LONG_CONDITION, PRUNE_BLOCKED_CONDITION,
    RECONCILED_CONDITION, SYNC_WINDOW_CONDITION, UNSUPPORTED_CONDITION,
};
/// At most this many warnings are spelled out in the message.
const UNSUPPORTED_SHOWN: usize = 10;
const DRIFT_FIELDS_SHOWN: usize = 5;
const OTHER_WRITERS_LIMIT: usize = 20;
/// At most this many objects in `resources` and `operationState.changes`:
/// a status must stay well under what the API server and etcd accept in
/// one object (an app of 20,000 objects listed in full was refused).
pub const RESOURCES_LIMIT: usize = 200;

tether_core::vocabulary! {
    /// The step of the loop that failed; its word is the reason of the
    /// [`RECONCILED_CONDITION`].
    pub enum Step("reconcile step") {
        /// Choosing whom the app's changes are made as
        /// (`tether_core::identity`): a ServiceAccount is required.
        Identity = "ServiceAccountRequired",
        /// Admitting the app and its objects to its Project
        /// (`tether_core::project`).
        Project = "ProjectViolation",
        /// Fetching the repository (or its credentials).
        Fetch = "FetchFailed",
        /// Verifying the commit's signature.
        Verify = "VerifyFailed",
        /// Rendering the manifests (Helm, Kustomize, Jsonnet, YAML).
        Render = "RenderFailed",
        /// Admitting the commit's namespaces (`tether_core::ownership`).
        Destination = "NamespaceNotAllowed",
        Diff = "DiffFailed",
        /// Admitting the objects other apps hold or nobody gave this app.
        Ownership = "OwnershipConflict",
        /// The API server refused the commit's objects in the dry run
        /// before any was applied (or their sync waves were malformed).
        Validate = "ValidationFailed",
        Apply = "ApplyFailed",
        /// Reaching the destination cluster (`spec.destination.cluster`):
        /// not registered, or not answering.
        Cluster = "ClusterUnreachable",
        /// Waiting for the apps in `spec.dependsOn` to be Synced and
        /// Healthy (`tether_core::dependency`).
        Dependency = "WaitingForDependency",
        /// `spec.dependsOn` leads back to the app itself.
        DependencyCycle = "DependencyCycle",
        /// A sync window is malformed, or refuses a `tether sync`.
        SyncWindow = "SyncWindowRefused",
        /// A sync hook failed or did not finish in time
        /// (`tether_core::hook`); a PreSync hook's failure applied nothing.
        Hook = "HookFailed",
    }
}

/// The reason of the [`RECONCILED_CONDITION`] when no step failed.
pub const RECONCILED_REASON: &str = OperationPhase::Succeeded.as_str();

/// A failed step and its message (which names the object or file).
#[derive(Debug, Clone)]
pub struct Failure {
    pub step: Step,
    pub message: String,
}

/// What the desired state was and how live compared with it.
pub struct Observed<'a> {
    pub revision: &'a str,
    pub tree: &'a str,
    /// Digest of the rendered objects at `revision`.
    pub digest: &'a str,
    /// What each source resolved to.
    pub sources: &'a [tether_source::SourceRevision],
    /// How `revision` relates to the last successful sync.
    pub change: RevisionChange,
    pub compared: &'a [Compared],
    /// The health rules in force for this Application.
    pub health: &'a Judge,
    /// The drifted objects and the response to each.
    pub drift: &'a [Assessed],
    pub prune: &'a PruneReport,
    /// Argo CD annotations Tether does not act on.
    pub unsupported: &'a [Warning],
    /// Why a sync window keeps automated syncs and self-heal from
    /// running, while one does.
    pub sync_window: Option<String>,
    /// The app's rollback pin, when it has one (`spec.pin`).
    pub pin: Option<&'a crate::api::pin::PinState>,
}

/// A sync this reconcile ran.
pub struct SyncRun<'a> {
    pub revision: &'a str,
    pub initiator: Initiator,
    pub started_at: &'a str,
    /// The report, or the error and what was applied before it.
    pub outcome: Result<&'a SyncReport, Stopped<'a>>,
    /// Set when the sync is not over but waits for a wave (its outcome is
    /// then why, and what it applied so far).
    pub waiting: Option<WaveWait>,
    /// The sync hooks it ran (or runs).
    pub hooks: &'a [HookRun],
}

/// A failed sync: why, and the objects it had applied before it stopped.
pub type Stopped<'a> = (String, &'a [(ObjectRef, Action)]);

/// The status after this reconcile. `now` is an RFC 3339 timestamp;
/// `alert_after` is how long the app may stay not Synced before
/// [`NOT_SYNCED_TOO_LONG_CONDITION`] is raised.
pub fn next_status(
    previous: Option<&ApplicationStatus>,
    generation: Option<i64>,
    observed: Option<&Observed<'_>>,
    sync: Option<&SyncRun<'_>>,
    failure: Option<&Failure>,
    alert_after: Duration,
    now: &str,
) -> ApplicationStatus {
    let mut status = previous.cloned().unwrap_or_default();
    status.observed_generation = generation;

    if let Some(observed) = observed {
        let judge = observed.health;
        status.resources = observed
            .compared
            .iter()
            .map(|compared| resource_status(compared, judge))
            .collect();
        let in_sync = observed.compared.iter().all(Compared::in_sync);
        status.sync.status = if in_sync {
            SyncStatus::Synced
        } else {
            SyncStatus::OutOfSync
        };
        status.sync.compared_to = Some(format!("{} (tree {})", observed.revision, observed.tree));
        status.sync.sources = observed
            .sources
            .iter()
            .map(|source| crate::api::application::SourceStatus {
                name: source.name.clone(),
                repo_url: source.repo_url.clone(),
                chart: source.chart.clone(),
                revision: source.revision.clone(),
                digest: source.digest.clone(),
            })
            .collect();
        if observed.change == RevisionChange::SameObjects {
            status.sync.revision = Some(observed.revision.to_string());
        }
        let healths: Vec<Health> = observed
            .compared
            .iter()
            .filter_map(|compared| object_health(compared, judge))
            .collect();
        let health = app_health(&healths);
        status.health = HealthInfo {
            status: health.status,
            message: health.message,
        };
        set_health_rules_condition(&mut status.conditions, judge, now);
        status.other_writers = other_writers_of(observed.compared);
        status.generated = generated_of(observed.compared, &status.generated);
    }
    if let Some(sync) = sync {
        record_sync(&mut status, sync, observed, now);
    }
    // An app whose cluster is away is neither known Synced nor Healthy;
    // what it last saw there (resources, drift, history) stays.
    if let Some(away) = failure.filter(|failure| failure.step == Step::Cluster) {
        status.sync.status = SyncStatus::Unknown;
        status.health = HealthInfo {
            status: HealthStatus::Unknown,
            message: away.message.clone(),
        };
    }
    if let Some(observed) = observed {
        let healed = sync.is_some_and(|sync| sync.outcome.is_ok());
        record_drift(&mut status, previous, observed.drift, healed, now);
        record_prune(&mut status, observed);
        let fights: Vec<String> = observed
            .drift
            .iter()
            .filter_map(|assessed| match &assessed.response {
                Response::BackOff(fight) => Some(fight.to_string()),
                _ => None,
            })
            .collect();
        let breaker = observed.prune.breaker.as_ref().map(ToString::to_string);
        let fights = (!fights.is_empty()).then(|| fights.join("; "));
        set_problem_condition(
            &mut status.conditions,
            SYNC_WINDOW_CONDITION,
            "Blocked",
            observed.sync_window.clone(),
            now,
        );
        set_problem_condition(
            &mut status.conditions,
            BACK_OFF_CONDITION,
            "FightingAnotherWriter",
            fights,
            now,
        );
        set_problem_condition(
            &mut status.conditions,
            PRUNE_BLOCKED_CONDITION,
            "CircuitBreaker",
            breaker,
            now,
        );
        set_problem_condition(
            &mut status.conditions,
            UNSUPPORTED_CONDITION,
            "ArgoCDAnnotation",
            unsupported_message(observed.unsupported),
            now,
        );
    }

    if let Some(observed) = observed {
        record_pin(&mut status, observed.pin, now);
        bound_resources(&mut status);
    }
    status.state = OperationalState::of(status.sync.status, status.health.status);
    set_reconciled_condition(&mut status.conditions, failure, now);
    set_not_synced_condition(&mut status, failure, alert_after, now);
    status.reconciled_at = previous.and_then(|p| p.reconciled_at.clone());
    if previous != Some(&status) {
        status.reconciled_at = Some(now.to_string());
    }
    status
}

/// Whether `next` differs from `previous` only in the revision it records
/// (and when it was reconciled): what a commit that changes none of the
/// app's objects does. Such a write may wait (see [`crate::report::writes`]).
pub fn only_revision_moved(previous: &ApplicationStatus, next: &ApplicationStatus) -> bool {
    let mut moved = previous.clone();
    moved.sync.revision.clone_from(&next.sync.revision);
    moved.sync.compared_to.clone_from(&next.sync.compared_to);
    moved.reconciled_at.clone_from(&next.reconciled_at);
    moved == *next
}

/// Writes what [`super::pinned::record`] decides of the app's pin.
fn record_pin(status: &mut ApplicationStatus, pin: Option<&crate::api::pin::PinState>, now: &str) {
    use crate::api::pin::PINNED_CONDITION;
    let was_pinned = status
        .conditions
        .iter()
        .any(|c| c.type_ == PINNED_CONDITION && c.status == "True");
    let synced = status.sync.revision.clone();
    let Some(record) = super::pinned::record(pin, was_pinned, synced.as_deref()) else {
        return;
    };
    let (value, reason, message) = record.condition;
    set_condition(
        &mut status.conditions,
        PINNED_CONDITION,
        value,
        reason,
        message,
        now,
    );
    if let Some(compared_to) = record.out_of_sync {
        status.sync.status = SyncStatus::OutOfSync;
        status.sync.compared_to = Some(compared_to);
    }
    if let Some((revision, why)) = record.lifted {
        let entry = HistoryEntry {
            id: HistoryEntry::next_id(&status.history),
            revision,
            time: now.to_string(),
            initiator: Initiator::Unpin,
            hooks: Vec::new(),
            by: None,
            reason: Some(why.to_string()),
        };
        status.history.insert(0, entry);
        status.history.truncate(HISTORY_LIMIT);
    }
}

fn record_sync(
    status: &mut ApplicationStatus,
    sync: &SyncRun<'_>,
    observed: Option<&Observed<'_>>,
    now: &str,
) {
    let (phase, message, changes) = match &sync.outcome {
        Ok(report) => (
            OperationPhase::Succeeded,
            format!("synced to {}", short(sync.revision)),
            report
                .results
                .iter()
                .map(|(object, action)| Change {
                    object: object.to_string(),
                    action: *action,
                })
                .collect(),
        ),
        Err((message, applied)) => (
            match sync.waiting {
                Some(_) => OperationPhase::Running,
                None => OperationPhase::Failed,
            },
            message.clone(),
            applied
                .iter()
                .map(|(object, action)| Change {
                    object: object.to_string(),
                    action: *action,
                })
                .collect(),
        ),
    };
    let changes = match status.operation_state.as_ref() {
        Some(earlier)
            if earlier.waiting.is_some()
                && earlier.phase == OperationPhase::Running
                && earlier.revision == sync.revision =>
        {
            resumed_changes(&earlier.changes, changes)
        }
        _ => changes,
    };
    let (changes, changes_omitted) = bound_changes(changes);
    status.operation_state = Some(OperationState {
        phase,
        message,
        revision: sync.revision.to_string(),
        started_at: sync.started_at.to_string(),
        finished_at: sync.waiting.is_none().then(|| now.to_string()),
        changes,
        changes_omitted,
        waiting: sync.waiting.clone(),
        hooks: sync.hooks.to_vec(),
    });
    let Ok(report) = &sync.outcome else {
        return;
    };
    status.sync.revision = Some(sync.revision.to_string());
    let pin = observed
        .and_then(|observed| observed.pin)
        .filter(|_| sync.initiator == Initiator::Rollback);
    status.history.insert(
        0,
        HistoryEntry {
            id: HistoryEntry::next_id(&status.history),
            revision: sync.revision.to_string(),
            time: now.to_string(),
            initiator: sync.initiator,
            hooks: sync.hooks.to_vec(),
            by: pin.map(|state| state.pin.by.clone()),
            reason: pin.map(|state| state.pin.reason.clone()),
        },
    );
    status.history.truncate(HISTORY_LIMIT);
    // Everything just applied is in sync now, and in the inventory.
    let mut created = false;
    for resource in &mut status.resources {
        if report.results.iter().any(|(id, _)| {
            id.kind == resource.kind
                && id.name == resource.name
                && id.namespace == resource.namespace
        }) {
            resource.sync = SyncStatus::Synced;
            resource.drift = None;
            created |= mark_created(resource);
        }
    }
    if created {
        status.health = app_health_of(&status.resources);
    }
    if status
        .resources
        .iter()
        .all(|r| r.sync == SyncStatus::Synced)
    {
        status.sync.status = SyncStatus::Synced;
    }
    if let Some(observed) = observed {
        status.sync.objects_digest = Some(observed.digest.to_string());
        // An object the API server names is in the inventory once created.
        let mut inventory: Vec<InventoryEntry> = observed
            .compared
            .iter()
            .filter(|c| generate_name(&c.desired).is_none())
            .map(inventory_entry)
            .collect();
        inventory.sort();
        inventory.dedup();
        status.inventory = inventory;
    }
}

/// Moves drift that was healed now, or that went away, to `lastDrift`;
/// keeps the rest in `drift` with the time it was first detected.
fn record_drift(
    status: &mut ApplicationStatus,
    previous: Option<&ApplicationStatus>,
    drift: &[Assessed],
    healed: bool,
    now: &str,
) {
    let before = previous.map(|p| p.drift.as_slice()).unwrap_or_default();
    let mut current = Vec::new();
    let mut resolved = Vec::new();
    for assessed in drift {
        let mut record = assessed.record.clone();
        if let Some(earlier) = before
            .iter()
            .find(|e| e.record.object == record.object && e.record.kind == record.kind)
        {
            record.detected_at = earlier.record.detected_at.clone();
        }
        match (&assessed.response, healed) {
            (Response::Heal, true) => resolved.push(DriftEntry {
                record,
                response: DriftOutcome::Healed,
                resolved_at: Some(now.to_string()),
            }),
            (Response::Heal, false) => current.push(DriftEntry {
                record,
                response: DriftOutcome::Reported,
                resolved_at: None,
            }),
            (response, _) => current.push(DriftEntry {
                record,
                response: response.outcome(),
                resolved_at: None,
            }),
        }
    }
    for gone in before
        .iter()
        .filter(|e| !drift.iter().any(|a| a.record.object == e.record.object))
    {
        resolved.push(DriftEntry {
            resolved_at: Some(now.to_string()),
            ..gone.clone()
        });
    }
    current.truncate(DRIFT_LIMIT);
    status.drift = current;
    if !resolved.is_empty() {
        resolved.append(&mut status.last_drift);
        resolved.truncate(LAST_DRIFT_LIMIT);
        status.last_drift = resolved;
    }
}

/// Orphans as prune left them; the inventory keeps every orphan not
/// deleted (or taken over by another app).
fn record_prune(status: &mut ApplicationStatus, observed: &Observed<'_>) {
    let prune = observed.prune;
    let mut orphans: Vec<OrphanStatus> = prune
        .orphans
        .iter()
        .map(|(id, fate)| OrphanStatus {
            object: id.to_string(),
            prune: fate.clone(),
        })
        .collect();
    // A deletion stays on record after the object is gone (the reconcile
    // its watch event triggers no longer sees it as an orphan), bounded.
    let deleted_before = status
        .orphans
        .iter()
        .filter(|old| old.prune.is_deleted() && !orphans.iter().any(|o| o.object == old.object))
        .take(PRUNED_KEPT_ON_RECORD)
        .cloned()
        .collect::<Vec<_>>();
    orphans.extend(deleted_before);
    status.orphans = orphans;
    let desired: std::collections::HashSet<&ObjectRef> =
        observed.compared.iter().map(|c| &c.id).collect();
    let mut inventory: Vec<InventoryEntry> = status
        .inventory
        .iter()
        .filter(|entry| desired.contains(&entry.id()))
        .cloned()
        .chain(prune.kept.iter().cloned())
        .collect();
    inventory.sort();
    inventory.dedup();
    status.inventory = inventory;
}

/// Cuts `resources` to [`RESOURCES_LIMIT`], keeping every object that is
/// not Synced and Healthy first; `resourceCount` keeps the total.
fn bound_resources(status: &mut ApplicationStatus) {
    let total = status.resources.len();
    status.resource_count = Some(total);
    if total <= RESOURCES_LIMIT {
        return;
    }
    let fine = |r: &ResourceStatus| {
        r.sync == SyncStatus::Synced
            && r.health
                .as_ref()
                .is_none_or(|h| h.status == HealthStatus::Healthy)
    };
    status.resources.sort_by_key(fine);
    status.resources.truncate(RESOURCES_LIMIT);
}

/// Cuts a sync's outcomes to [`RESOURCES_LIMIT`], changes before
/// `unchanged`; returns them and how many were left out.
/// The changes of a sync that resumed after waiting for a wave: what the
/// earlier passes did, in their order, then what this pass did to other
/// objects. An object an earlier pass changed keeps that change (this pass
/// found it in sync: `unchanged` says nothing about the operation).
fn resumed_changes(earlier: &[Change], now: Vec<Change>) -> Vec<Change> {
    let mut changes = earlier.to_vec();
    for change in now {
        match changes.iter_mut().find(|c| c.object == change.object) {
            Some(known) if known.action == Action::Unchanged => known.action = change.action,
            Some(_) => {}
            None => changes.push(change),
        }
    }
    changes
}

fn bound_changes(mut changes: Vec<Change>) -> (Vec<Change>, usize) {
    let total = changes.len();
    if total <= RESOURCES_LIMIT {
        return (changes, 0);
    }
    changes.sort_by_key(|change| change.action == Action::Unchanged);
    changes.truncate(RESOURCES_LIMIT);
    (changes, total - RESOURCES_LIMIT)
}

/// An object judged Missing before this sync created it exists now; its
/// first status arrives with the next watch event. Until then it is
/// Progressing, not Missing: a fresh sync is not "applied but failing".
fn mark_created(resource: &mut ResourceStatus) -> bool {
    let Some(health) = &mut resource.health else {
        return false;
    };
    if health.status != HealthStatus::Missing {
        return false;
    }
    health.status = HealthStatus::Progressing;
    health.message = format!(
        "{} {}: created, waiting for its first status",
        resource.kind, resource.name
    );
    true
}

/// The application's health from its resources' (as written in status).
fn app_health_of(resources: &[ResourceStatus]) -> HealthInfo {
    let healths: Vec<Health> = resources
        .iter()
        .filter_map(|resource| resource.health.as_ref())
        .map(|health| Health::new(health.status, health.message.clone()))
        .collect();
    let health = app_health(&healths);
    HealthInfo {
        status: health.status,
        message: health.message,
    }
}

fn resource_status(compared: &Compared, judge: &Judge) -> ResourceStatus {
    let id = &compared.id;
    ResourceStatus {
        group: id.group.clone(),
        kind: id.kind.clone(),
        namespace: id.namespace.clone(),
        name: id.name.clone(),
        sync: if compared.in_sync() {
            SyncStatus::Synced
        } else {
            SyncStatus::OutOfSync
        },
        health: object_health(compared, judge).map(|health| HealthInfo {
            status: health.status,
            message: health.message,
        }),
        drift: drift_summary(compared),
    }
}

fn object_health(compared: &Compared, judge: &Judge) -> Option<Health> {
    match &compared.live {
        Some(live) => judge.assess(live),
        None => Some(Health::new(
            HealthStatus::Missing,
            format!("{}: desired but absent", compared.id),
        )),
    }
}

/// One line: the differing fields and who last wrote each.
fn drift_summary(compared: &Compared) -> Option<String> {
    match &compared.state {
        ObjectState::InSync => None,
        ObjectState::Missing => Some("missing".into()),
        ObjectState::Uncomparable(reason) => Some(format!("not compared: {reason}")),
        ObjectState::Differs(diff) => {
            let live = compared.live.as_ref()?;
            let ownership = Ownership::of(live).ok()?;
            let fields = drifted_fields(diff, &ownership);
            let mut parts: Vec<String> = fields
                .iter()
                .take(DRIFT_FIELDS_SHOWN)
                .map(|field| match &field.writer {
                    Some(writer) => format!("{} (by {})", field.path, writer.manager),
                    None => field.path.clone(),
                })
                .collect();
            if fields.len() > DRIFT_FIELDS_SHOWN {
                parts.push(format!("and {} more", fields.len() - DRIFT_FIELDS_SHOWN));
            }
            Some(parts.join(", "))
        }
    }
}

/// Every writer besides Tether of the live objects, most recent first.
/// An object whose managedFields cannot be read is already reported as
/// not compared.
fn other_writers_of(compared: &[Compared]) -> Vec<OtherWriterEntry> {
    let mut entries: Vec<OtherWriterEntry> = compared
        .iter()
        .filter_map(|c| Some((c.id.to_string(), other_writers(c.live.as_ref()?).ok()?)))
        .flat_map(|(object, writers)| {
            writers.into_iter().map(move |writer| OtherWriterEntry {
                object: object.clone(),
                writer,
            })
        })
        .collect();
    entries.sort_by(|a, b| b.writer.writer.time.cmp(&a.writer.writer.time));
    entries.truncate(OTHER_WRITERS_LIMIT);
    entries
}

/// The objects among `compared` that the API server named, with the name
/// and UID each got; one whose live copy is not seen (yet, or any more)
/// keeps its `previous` record.
fn generated_of(compared: &[Compared], previous: &[GeneratedEntry]) -> Vec<GeneratedEntry> {
    compared
        .iter()
        .filter(|c| generate_name(&c.desired).is_none())
        .filter_map(|c| {
            let key = key_of(&c.desired)?;
            let generate_name = c.desired.pointer("/metadata/generateName")?.as_str()?;
            let entry = GeneratedEntry {
                group: c.id.group.clone(),
                kind: c.id.kind.clone(),
                namespace: c.id.namespace.clone(),
                generate_name: generate_name.to_string(),
                key: key.to_string(),
                name: c.id.name.clone(),
                uid: String::new(),
            };
            match c
                .live
                .as_ref()
                .and_then(|l| l.pointer("/metadata/uid")?.as_str())
            {
                Some(uid) => Some(GeneratedEntry {
                    uid: uid.to_string(),
                    ..entry
                }),
                None => previous
                    .iter()
                    .find(|p| {
                        GeneratedEntry {
                            uid: p.uid.clone(),
                            ..entry.clone()
                        } == **p
                    })
                    .cloned(),
            }
        })
        .collect()
}

/// The `Unsupported` condition's message: each warning, at most
/// [`UNSUPPORTED_SHOWN`]; `None` when there is none.
fn unsupported_message(warnings: &[Warning]) -> Option<String> {
    if warnings.is_empty() {
        return None;
    }
    let mut shown: Vec<String> = warnings
        .iter()
        .take(UNSUPPORTED_SHOWN)
        .map(ToString::to_string)
        .collect();
    if warnings.len() > UNSUPPORTED_SHOWN {
        shown.push(format!("and {} more", warnings.len() - UNSUPPORTED_SHOWN));
    }
    Some(shown.join("; "))
}

fn inventory_entry(compared: &Compared) -> InventoryEntry {
    let version = compared
        .desired
        .get("apiVersion")
        .and_then(|v| v.as_str())
        .and_then(|v| v.rsplit('/').next())
        .unwrap_or_default();
    InventoryEntry {
        group: compared.id.group.clone(),
        version: version.to_string(),
        kind: compared.id.kind.clone(),
        namespace: compared.id.namespace.clone(),
        name: compared.id.name.clone(),
    }
}

/// `HealthRules`: True when every rule in force compiled; False, naming
/// each rule left out, when some did not.
fn set_health_rules_condition(conditions: &mut Vec<Condition>, judge: &Judge, now: &str) {
    let problems = judge.problems();
    let (value, reason, message) = if problems.is_empty() {
        ("True", "Loaded", judge.summary())
    } else {
        ("False", "RulesLeftOut", problems.join("; "))
    };
    set_condition(conditions, health::CONDITION, value, reason, message, now);
}

/// Sets condition `type_` True with `message`, or False when `None`
/// (added only once it has been True).
fn set_problem_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    reason: &str,
    message: Option<String>,
    now: &str,
) {
    let value = if message.is_some() { "True" } else { "False" };
    let existing = conditions.iter_mut().find(|c| c.type_ == type_);
    match (existing, message) {
        (Some(existing), message) => {
            if existing.status != value {
                existing.last_transition_time = Some(now.to_string());
            }
            existing.status = value.into();
            existing.reason = if value == "True" { reason } else { "Resolved" }.into();
            existing.message = message.unwrap_or_default();
        }
        (None, Some(message)) => conditions.push(Condition {
            type_: type_.into(),
            status: value.into(),
            reason: reason.into(),
            message,
            last_transition_time: Some(now.to_string()),
        }),
        (None, None) => {}
    }
}

/// Product rule 5: `sync.notSyncedSince` follows whether the app is Synced
/// (live matches Git and no step of the reconcile fails), and
/// [`NOT_SYNCED_TOO_LONG_CONDITION`] is True — saying since when and why —
/// while that has lasted longer than `alert_after`; False once Synced.
fn set_not_synced_condition(
    status: &mut ApplicationStatus,
    failure: Option<&Failure>,
    alert_after: Duration,
    now: &str,
) {
    let synced = status.sync.status == SyncStatus::Synced && failure.is_none();
    let since = alert::not_synced_since(status.sync.not_synced_since.as_deref(), synced, now);
    let overdue = alert::too_long(since.as_deref(), now, alert_after);
    let (reason, why) = why_not_synced(status, failure);
    let message = overdue.then(|| {
        format!(
            "not Synced for more than {} (since {}): {why}",
            alert::span(alert_after),
            since.as_deref().unwrap_or(now),
        )
    });
    status.sync.not_synced_since = since;
    set_problem_condition(
        &mut status.conditions,
        NOT_SYNCED_TOO_LONG_CONDITION,
        reason,
        message,
        now,
    );
}

/// Why an app is not Synced, as a condition reason and a sentence: the
/// failing step, else the drift left in place (and why it is left), else a
/// sync that has not run.
fn why_not_synced(status: &ApplicationStatus, failure: Option<&Failure>) -> (&'static str, String) {
    if let Some(failure) = failure {
        let first = failure.message.lines().next().unwrap_or_default();
        return (failure.step.as_str(), first.to_string());
    }
    if let Some(pinned) = status
        .conditions
        .iter()
        .find(|c| c.type_ == crate::api::pin::PINNED_CONDITION && c.status == "True")
    {
        return ("Pinned", pinned.message.clone());
    }
    let kept = |outcome: DriftOutcome| {
        status
            .drift
            .iter()
            .filter(|entry| entry.response == outcome)
            .map(|entry| entry.record.object.to_string())
            .collect::<Vec<_>>()
    };
    let emergency: Vec<String> = status
        .drift
        .iter()
        .filter(|entry| entry.record.kind == DriftKind::Emergency)
        .map(|entry| entry.record.object.to_string())
        .collect();
    let fighting = kept(DriftOutcome::BackedOff);
    let reported = kept(DriftOutcome::Reported);
    let named = |objects: &[String]| {
        let shown = objects
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        match objects.len() {
            n if n > 3 => format!("{shown} and {} more", n - 3),
            _ => shown,
        }
    };
    if !emergency.is_empty() {
        return (
            "BreakGlassOpen",
            format!(
                "changes made in an open break-glass window are kept: {}",
                named(&emergency)
            ),
        );
    }
    if !fighting.is_empty() {
        return (
            "SelfHealBackOff",
            format!(
                "self-heal backed off from another writer: {}",
                named(&fighting)
            ),
        );
    }
    if !reported.is_empty() {
        return (
            "DriftKept",
            format!(
                "drift is reported and left in place (self-heal off or driftResponse: warn): {}",
                named(&reported)
            ),
        );
    }
    match status.sync.status {
        SyncStatus::OutOfSync => (
            "SyncPending",
            "live state differs from Git and no sync has applied it (automated sync off? run `tether sync`)"
                .to_string(),
        ),
        _ => (
            "NotCompared",
            "live state has not been compared with Git yet".to_string(),
        ),
    }
}

fn set_reconciled_condition(conditions: &mut Vec<Condition>, failure: Option<&Failure>, now: &str) {
    let (value, reason, message) = match failure {
        Some(failure) => ("False", failure.step.as_str(), failure.message.clone()),
        None => ("True", RECONCILED_REASON, String::new()),
    };
    set_condition(
        conditions,
        RECONCILED_CONDITION,
        value,
        reason,
        message,
        now,
    );
}

fn short(revision: &str) -> &str {
    &revision[..revision.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tether_core::ObjectRef;

    fn compared(name: &str, managed_fields: serde_json::Value) -> Compared {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "shop", "managedFields": managed_fields},
            "data": {"greeting": "hi", "mode": "fast"}});
        Compared {
            id: ObjectRef::from_object(&live).unwrap(),
            desired: live.clone(),
            live: Some(live),
            state: ObjectState::InSync,
        }
    }

    #[test]
    fn other_writers_of_every_object_are_listed_newest_first() {
        let tether = json!({"manager": "tether", "operation": "Apply",
            "fieldsV1": {"f:data": {"f:greeting": {}}}});
        let patch = json!({"manager": "kubectl-patch", "operation": "Update",
            "time": "2026-11-30T10:00:00Z", "fieldsV1": {"f:data": {"f:mode": {}}}});
        let edit = json!({"manager": "kubectl-edit", "operation": "Update",
            "time": "2026-11-30T11:00:00Z", "fieldsV1": {"f:data": {"f:mode": {}}}});
        let listed = other_writers_of(&[
            compared("a", json!([tether, patch])),
            compared("b", json!([tether, edit])),
            compared("c", json!([tether])),
        ]);
        let found: Vec<(&str, &str)> = listed
            .iter()
            .map(|e| (e.object.as_str(), e.writer.writer.manager.as_str()))
            .collect();
        assert_eq!(
            found,
            [
                ("ConfigMap shop/b", "kubectl-edit"),
                ("ConfigMap shop/a", "kubectl-patch")
            ]
        );
        assert_eq!(listed[0].writer.paths, ["data.mode"]);
    }

    fn recorded_at(revision: &str, reconciled_at: &str) -> ApplicationStatus {
        let mut status = ApplicationStatus::default();
        status.sync.status = SyncStatus::Synced;
        status.sync.revision = Some(revision.into());
        status.sync.compared_to = Some(format!("{revision} (tree t)"));
        status.health.status = HealthStatus::Healthy;
        status.reconciled_at = Some(reconciled_at.into());
        status
    }

    #[test]
    fn a_status_that_only_records_a_new_revision_may_wait() {
        let previous = recorded_at("aaa", "2026-12-02T10:00:00Z");
        let next = recorded_at("bbb", "2026-12-02T10:05:00Z");
        assert!(only_revision_moved(&previous, &next));
    }

    #[test]
    fn a_status_that_changes_anything_else_is_written_at_once() {
        let previous = recorded_at("aaa", "2026-12-02T10:00:00Z");
        let mut next = recorded_at("bbb", "2026-12-02T10:05:00Z");
        next.health.status = HealthStatus::Degraded;
        assert!(!only_revision_moved(&previous, &next));
        let mut next = recorded_at("aaa", "2026-12-02T10:05:00Z");
        next.sync.status = SyncStatus::OutOfSync;
        assert!(!only_revision_moved(&previous, &next));
    }

    #[test]
    fn a_large_app_lists_its_problems_first_and_at_most_the_limit() {
        let resource = |i: usize, sync: SyncStatus| ResourceStatus {
            kind: "ConfigMap".into(),
            name: format!("c{i}"),
            sync,
            ..ResourceStatus::default()
        };
        let mut status = ApplicationStatus {
            resources: (0..20_000)
                .map(|i| resource(i, SyncStatus::Synced))
                .collect(),
            ..ApplicationStatus::default()
        };
        status.resources[12_345] = resource(12_345, SyncStatus::OutOfSync);
        bound_resources(&mut status);
        assert_eq!(status.resources.len(), RESOURCES_LIMIT);
        assert_eq!(status.resources[0].name, "c12345");
        assert_eq!(status.resource_count, Some(20_000));

        let changes: Vec<Change> = (0..20_000)
            .map(|i| Change {
                object: format!("ConfigMap shop/c{i}"),
                action: if i == 19_999 {
                    Action::Configured
                } else {
                    Action::Unchanged
                },
            })
            .collect();
        let (kept, omitted) = bound_changes(changes);
        assert_eq!(
            (kept.len(), omitted),
            (RESOURCES_LIMIT, 20_000 - RESOURCES_LIMIT)
        );
        assert_eq!(kept[0].action, Action::Configured);
    }

    fn hook_run(outcome: tether_core::hook::HookOutcome) -> HookRun {
        HookRun {
            name: "Job shop/migrate".into(),
            generate_name: None,
            phase: tether_core::hook::HookPhase::PreSync,
            outcome,
            message: String::new(),
            started_at: "2026-12-05T08:00:00Z".into(),
            finished_at: None,
        }
    }

    #[test]
    fn a_sync_records_its_hooks_in_the_operation_and_its_history_entry() {
        use tether_core::hook::HookOutcome;
        let mut status = ApplicationStatus::default();
        let hooks = [hook_run(HookOutcome::Succeeded)];
        let report = SyncReport::default();
        let sync = SyncRun {
            revision: "abc",
            initiator: Initiator::Automated,
            started_at: "2026-12-05T08:00:00Z",
            outcome: Ok(&report),
            waiting: None,
            hooks: &hooks,
        };
        record_sync(&mut status, &sync, None, "2026-12-05T08:00:05Z");
        assert_eq!(status.operation_state.as_ref().unwrap().hooks, hooks);
        assert_eq!(status.history[0].hooks, hooks);
    }

    #[test]
    fn a_sync_waiting_for_a_hook_is_running_and_not_yet_history() {
        use tether_core::hook::{HookOutcome, HookPhase};
        let mut status = ApplicationStatus::default();
        let hooks = [hook_run(HookOutcome::Running)];
        let sync = SyncRun {
            revision: "abc",
            initiator: Initiator::Automated,
            started_at: "2026-12-05T08:00:00Z",
            outcome: Err(("waiting for PreSync hook Job shop/migrate".into(), &[])),
            waiting: Some(WaveWait {
                wave: 0,
                object: "Job shop/migrate: 1 pod(s) active, not complete yet".into(),
                since: "2026-12-05T08:00:00Z".into(),
                hook: Some(HookPhase::PreSync),
            }),
            hooks: &hooks,
        };
        record_sync(&mut status, &sync, None, "2026-12-05T08:00:02Z");
        let operation = status.operation_state.as_ref().unwrap();
        assert_eq!(operation.phase, OperationPhase::Running);
        assert_eq!(operation.finished_at, None);
        assert_eq!(operation.hooks, hooks);
        assert!(status.history.is_empty());
    }

    #[test]
    fn a_resumed_sync_keeps_what_its_earlier_passes_changed_in_their_order() {
        let change = |object: &str, action: Action| Change {
            object: object.into(),
            action,
        };
        let earlier = [change("Deployment shop/db", Action::Created)];
        let now = vec![
            change("Deployment shop/db", Action::Unchanged),
            change("ConfigMap shop/after", Action::Created),
        ];
        assert_eq!(
            resumed_changes(&earlier, now),
            [
                change("Deployment shop/db", Action::Created),
                change("ConfigMap shop/after", Action::Created),
            ]
        );
    }

    fn not_synced_alert(status: &ApplicationStatus) -> Option<&Condition> {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == NOT_SYNCED_TOO_LONG_CONDITION)
    }

    #[test]
    fn an_app_failing_longer_than_its_threshold_is_not_synced_too_long_until_synced_again() {
        let five_seconds = Duration::from_secs(5);
        let failing = Failure {
            step: Step::Validate,
            message: "Deployment shop/web: spec.replicas: Invalid value".into(),
        };
        let mut synced = ApplicationStatus::default();
        synced.sync.status = SyncStatus::Synced;
        let t = |s: u32| format!("2026-12-03T10:00:{s:02}Z");
        let failing_at = |previous: &ApplicationStatus, s: u32| {
            next_status(
                Some(previous),
                None,
                None,
                None,
                Some(&failing),
                five_seconds,
                &t(s),
            )
        };

        let first = failing_at(&synced, 0);
        assert_eq!(first.sync.not_synced_since.as_deref(), Some(t(0).as_str()));
        assert!(
            not_synced_alert(&first).is_none(),
            "not raised before the threshold"
        );

        let later = failing_at(&first, 4);
        assert_eq!(
            later, first,
            "nothing to write while it waits out the threshold"
        );

        let overdue = failing_at(&first, 6);
        let raised = not_synced_alert(&overdue).expect("raised");
        assert_eq!(
            (raised.status.as_str(), raised.reason.as_str()),
            ("True", "ValidationFailed")
        );
        assert_eq!(
            raised.message,
            format!(
                "not Synced for more than 5s (since {}): Deployment shop/web: spec.replicas: Invalid value",
                t(0)
            )
        );
        assert_eq!(
            overdue.sync.not_synced_since.as_deref(),
            Some(t(0).as_str())
        );

        let fixed = next_status(Some(&overdue), None, None, None, None, five_seconds, &t(9));
        let cleared = not_synced_alert(&fixed).expect("kept, False");
        assert_eq!(
            (cleared.status.as_str(), cleared.reason.as_str()),
            ("False", "Resolved")
        );
        assert_eq!(fixed.sync.not_synced_since, None);
        assert_eq!(cleared.last_transition_time.as_deref(), Some(t(9).as_str()));
    }

    #[test]
    fn drift_left_by_warn_says_which_objects_are_kept_out_of_sync() {
        let mut status = ApplicationStatus::default();
        status.sync.status = SyncStatus::OutOfSync;
        status.sync.not_synced_since = Some("2026-12-03T09:00:00Z".into());
        status.drift = vec![DriftEntry {
            record: tether_core::drift::DriftRecord {
                object: ObjectRef::from_object(&json!({"apiVersion": "apps/v1",
                    "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}}))
                .unwrap(),
                kind: DriftKind::Manual,
                fields: Vec::new(),
                detected_at: "2026-12-03T09:00:00Z".into(),
            },
            response: DriftOutcome::Reported,
            resolved_at: None,
        }];
        let next = next_status(
            Some(&status),
            None,
            None,
            None,
            None,
            Duration::from_secs(3600),
            "2026-12-03T10:02:00Z",
        );
        let raised = not_synced_alert(&next).expect("raised");
        assert_eq!(raised.reason, "DriftKept");
        assert!(
            raised.message.starts_with(
                "not Synced for more than 1h (since 2026-12-03T09:00:00Z): drift is reported and left in place"
            ),
            "{}",
            raised.message
        );
        assert!(
            raised.message.contains("Deployment shop/web"),
            "{}",
            raised.message
        );
    }
}
