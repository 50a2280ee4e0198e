//! What stays on record from one reconcile to the next: drift (with when
//! it was first detected, and the drift since resolved) and orphans (with
//! those pruned, for a while after they are gone).

use tether_core::ObjectRef;
use tether_core::drift::DriftOutcome;

use crate::api::application::{ApplicationStatus, DriftEntry, InventoryEntry, OrphanStatus};
use crate::observe::drift::{Assessed, Response};

use super::Observed;

/// Deleted orphans still listed in status after they are gone.
const PRUNED_KEPT_ON_RECORD: usize = 20;
const DRIFT_LIMIT: usize = 50;
const LAST_DRIFT_LIMIT: usize = 10;

/// Moves drift that was healed now, or that went away, to `lastDrift`;
/// keeps the rest in `drift` with the time it was first detected.
pub(super) fn record_drift(
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
pub(super) fn record_prune(status: &mut ApplicationStatus, observed: &Observed<'_>) {
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
