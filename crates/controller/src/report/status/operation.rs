//! What a sync leaves in status: the operation (its phase, its changes,
//! bounded), a history entry, and the inventory of what it applied; and
//! the history entry and condition of a rollback's pin.

use tether_core::generated::generate_name;
use tether_core::health::HealthStatus;
use tether_core::{Action, Initiator, OperationPhase, SyncStatus};

use crate::api::application::{
    ApplicationStatus, Change, HistoryEntry, InventoryEntry, OperationState, ResourceStatus, holds,
    set_condition,
};

use super::resources::{app_health_of, inventory_entry};
use super::{Observed, RESOURCES_LIMIT, SyncRun};
use crate::sync::SyncReport;

const HISTORY_LIMIT: usize = 10;

/// Writes what [`crate::report::pinned::record`] decides of the app's pin.
pub(super) fn record_pin(
    status: &mut ApplicationStatus,
    pin: Option<&crate::api::pin::PinState>,
    now: &str,
) {
    use crate::api::pin::PINNED_CONDITION;
    let was_pinned = holds(&status.conditions, PINNED_CONDITION);
    let synced = status.sync.revision.clone();
    let Some(record) = crate::report::pinned::record(pin, was_pinned, synced.as_deref()) else {
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

/// What a sync run did: the operation, and once it succeeded, the synced
/// revision, a history entry, the applied objects in sync and the
/// inventory.
pub(super) fn record_sync(
    status: &mut ApplicationStatus,
    sync: &SyncRun<'_>,
    observed: Option<&Observed<'_>>,
    now: &str,
) {
    status.operation_state = Some(operation_state(status.operation_state.as_ref(), sync, now));
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
    mark_applied(status, report);
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

/// The operation `sync` is (or ended as), after `earlier`: a sync that
/// resumes after waiting for a wave keeps what its earlier passes did.
fn operation_state(
    earlier: Option<&OperationState>,
    sync: &SyncRun<'_>,
    now: &str,
) -> OperationState {
    let (phase, message, applied) = match &sync.outcome {
        Ok(report) => (
            OperationPhase::Succeeded,
            format!("synced to {}", short(sync.revision)),
            report.results.as_slice(),
        ),
        Err((message, applied)) => (
            match sync.waiting {
                Some(_) => OperationPhase::Running,
                None => OperationPhase::Failed,
            },
            message.clone(),
            *applied,
        ),
    };
    let changes: Vec<Change> = applied
        .iter()
        .map(|(object, action)| Change {
            object: object.to_string(),
            action: *action,
        })
        .collect();
    let changes = match earlier {
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
    OperationState {
        phase,
        message,
        revision: sync.revision.to_string(),
        started_at: sync.started_at.to_string(),
        finished_at: sync.waiting.is_none().then(|| now.to_string()),
        changes,
        changes_omitted,
        waiting: sync.waiting.clone(),
        hooks: sync.hooks.to_vec(),
    }
}

/// Everything `report` applied is in sync now; the app is Synced once
/// every object is, and its health counts what was just created.
fn mark_applied(status: &mut ApplicationStatus, report: &SyncReport) {
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
}

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

/// Cuts a sync's outcomes to [`RESOURCES_LIMIT`], changes before
/// `unchanged`; returns them and how many were left out.
pub(super) fn bound_changes(mut changes: Vec<Change>) -> (Vec<Change>, usize) {
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

fn short(revision: &str) -> &str {
    &revision[..revision.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::application::{HookRun, WaveWait};
    use crate::sync::SyncReport;

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
}
