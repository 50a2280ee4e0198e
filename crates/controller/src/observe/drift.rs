//! Drift, for one reconcile: which compared objects drifted, of which kind,
//! and what Tether does about each — revert it, only report it, or back off
//! because it keeps fighting another writer.
//!
//! The kinds come from `tether_core::drift::classify`, the back-off from
//! its `FlapGuard`; this module only gathers their inputs.

use std::fmt;
use std::time::SystemTime;

use serde_json::Value;
use tether_core::OperationPhase;
use tether_core::attribution::Ownership;
use tether_core::drift::{
    DriftKind, DriftOutcome, DriftRecord, Fight, FlapGuard, HealVerdict, LiveState, Observation,
    WindowScope, classify, drifted_fields,
};
use tether_core::tracking::AppRef;

use crate::api::ApplicationStatus;
use crate::api::application::{InventoryEntry, SELF_HEAL_ANNOTATION};
use crate::observe::compare::{Compared, ObjectState};

/// Fields kept per record in status; the rest are counted in the events.
const FIELDS_PER_RECORD: usize = 10;

/// What Tether does about one drifted object; the same words in status,
/// CLI and events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// Re-apply Git's state of the object now.
    Heal,
    /// Leave it and report it: self-heal is off, warn mode, the object
    /// opted out, or a break-glass window covers it.
    Report,
    /// Leave it for a while: Tether keeps reverting this field and someone
    /// keeps changing it back.
    BackOff(Fight),
}

impl Response {
    /// What status records once this response was carried out.
    pub fn outcome(&self) -> DriftOutcome {
        match self {
            Response::Heal => DriftOutcome::Healed,
            Response::Report => DriftOutcome::Reported,
            Response::BackOff(_) => DriftOutcome::BackedOff,
        }
    }
}

/// One drifted object and the response to it.
#[derive(Debug, Clone)]
pub struct Assessed {
    pub record: DriftRecord,
    pub response: Response,
}

impl fmt::Display for Assessed {
    /// `Deployment shop/web (Manual): spec.replicas 2 → 5 by kubectl-scale`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let record = &self.record;
        write!(f, "{} ({})", record.object, record.kind)?;
        if record.fields.is_empty() {
            return f.write_str(": missing");
        }
        let fields: Vec<String> = record
            .fields
            .iter()
            .map(|field| {
                let show = |value: &Option<Value>| match value {
                    Some(value) => value.to_string(),
                    None => "(absent)".into(),
                };
                let by = field
                    .writer
                    .as_ref()
                    .map(|w| format!(" by {}", w.manager))
                    .unwrap_or_default();
                format!(
                    "{} {} → {}{by}",
                    field.path,
                    show(&field.desired),
                    show(&field.live)
                )
            })
            .collect();
        write!(f, ": {}", fields.join(", "))
    }
}

/// The app-level inputs of an assessment.
pub struct Policy<'a> {
    pub app: &'a AppRef,
    /// Objects Tether applied before.
    pub inventory: &'a [InventoryEntry],
    /// A new revision is not applied yet: Tether's own fields may differ.
    pub pending: bool,
    /// Self-heal is on (not `selfHeal: false`, not warn mode).
    pub heals: bool,
    /// The app's open break-glass windows: changes in their scope are
    /// Emergency drift, reported and left alone.
    pub windows: &'a [WindowScope],
    /// The last sync toward the desired revision stopped half-way (see
    /// [`interrupted`]): Tether's own stale fields are Accidental drift.
    pub interrupted: bool,
}

/// Whether the last sync toward `revision` stopped half-way: it failed
/// after applying some objects, or it was still `Running` when this
/// reconcile began (the controller stopped mid-sync: a reconcile of an
/// app never overlaps its own sync, so a `Running` left behind is stale)
/// without waiting for a wave (a sync that waits resumes where it was:
/// the waves after it are not applied yet, not lost).
pub fn interrupted(status: Option<&ApplicationStatus>, revision: &str) -> bool {
    let Some(operation) = status.and_then(|s| s.operation_state.as_ref()) else {
        return false;
    };
    operation.revision == revision
        && (operation.phase == OperationPhase::Running && operation.waiting.is_none()
            || operation.phase == OperationPhase::Failed && !operation.changes.is_empty())
}

/// The drifted objects among `compared`, each with its response. Counts a
/// revert in `flaps` for every object it decides to heal.
pub fn assess(
    policy: &Policy<'_>,
    compared: &[Compared],
    flaps: &mut FlapGuard,
    now: SystemTime,
    detected_at: &str,
) -> Vec<Assessed> {
    compared
        .iter()
        .filter_map(|object| {
            let record = record(policy, object, now, detected_at)?;
            let response = respond(policy, object, &record, flaps, now);
            Some(Assessed { record, response })
        })
        .collect()
}

fn record(
    policy: &Policy<'_>,
    object: &Compared,
    now: SystemTime,
    detected_at: &str,
) -> Option<DriftRecord> {
    let fields = match (&object.state, &object.live) {
        (ObjectState::Differs(diff), Some(live)) => {
            drifted_fields(diff, &Ownership::of(live).ok()?)
        }
        (ObjectState::Missing, _) => Vec::new(),
        _ => return None,
    };
    let live = match object.state {
        ObjectState::Missing => LiveState::Missing,
        _ => LiveState::Present(&fields),
    };
    let observation = Observation {
        app: policy.app,
        object: &object.id,
        live,
        applied: in_inventory(policy.inventory, object),
        pending: policy.pending,
        interrupted_sync: policy.interrupted,
    };
    let kind = classify(&observation, policy.windows, now)?;
    let mut fields = fields;
    fields.truncate(FIELDS_PER_RECORD);
    Some(DriftRecord {
        object: object.id.clone(),
        kind,
        fields,
        detected_at: detected_at.to_string(),
    })
}

fn respond(
    policy: &Policy<'_>,
    object: &Compared,
    record: &DriftRecord,
    flaps: &mut FlapGuard,
    now: SystemTime,
) -> Response {
    if !policy.heals || record.kind == DriftKind::Emergency || opted_out(object) {
        return Response::Report;
    }
    // Only another writer can be fought; partial state is converged (a
    // failing sync has its own retry backoff).
    if record.kind == DriftKind::Accidental {
        return Response::Heal;
    }
    for field in &record.fields {
        let writer = field.writer.as_ref().map(|w| w.manager.as_str());
        if let HealVerdict::BackOff(fight) = flaps.decide(&record.object, &field.path, writer, now)
        {
            return Response::BackOff(fight);
        }
    }
    Response::Heal
}

fn in_inventory(inventory: &[InventoryEntry], object: &Compared) -> bool {
    inventory.iter().any(|entry| {
        entry.group == object.id.group
            && entry.kind == object.id.kind
            && entry.namespace == object.id.namespace
            && entry.name == object.id.name
    })
}

/// `tether.dev/self-heal: disabled` on the live object.
fn opted_out(object: &Compared) -> bool {
    object
        .live
        .as_ref()
        .and_then(|live| live.pointer("/metadata/annotations"))
        .and_then(|annotations| annotations.get(SELF_HEAL_ANNOTATION))
        .and_then(Value::as_str)
        == Some("disabled")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::application::{Change, OperationState};

    fn status(phase: OperationPhase, revision: &str, applied: usize) -> ApplicationStatus {
        ApplicationStatus {
            operation_state: Some(OperationState {
                phase,
                message: String::new(),
                revision: revision.into(),
                started_at: String::new(),
                finished_at: None,
                changes: (0..applied)
                    .map(|i| Change {
                        object: format!("ConfigMap shop/c{i}"),
                        action: tether_core::Action::Configured,
                    })
                    .collect(),
                changes_omitted: 0,
                waiting: None,
                hooks: Vec::new(),
            }),
            ..ApplicationStatus::default()
        }
    }

    #[test]
    fn a_sync_left_running_by_a_stopped_controller_was_interrupted() {
        assert!(interrupted(
            Some(&status(OperationPhase::Running, "b", 0)),
            "b"
        ));
    }

    #[test]
    fn a_sync_waiting_for_a_wave_was_not_interrupted() {
        let mut waiting = status(OperationPhase::Running, "b", 1);
        if let Some(operation) = waiting.operation_state.as_mut() {
            operation.waiting = Some(crate::api::application::WaveWait {
                wave: 0,
                object: "Deployment shop/db: Progressing".into(),
                since: "2026-12-05T08:00:00Z".into(),
                hook: None,
            });
        }
        assert!(!interrupted(Some(&waiting), "b"));
    }

    #[test]
    fn a_failed_sync_that_applied_some_objects_stopped_half_way() {
        assert!(interrupted(
            Some(&status(OperationPhase::Failed, "b", 1)),
            "b"
        ));
        assert!(!interrupted(
            Some(&status(OperationPhase::Failed, "b", 0)),
            "b"
        ));
    }

    #[test]
    fn an_old_revisions_or_a_finished_sync_is_not_interrupted() {
        assert!(!interrupted(
            Some(&status(OperationPhase::Running, "a", 0)),
            "b"
        ));
        assert!(!interrupted(
            Some(&status(OperationPhase::Succeeded, "b", 3)),
            "b"
        ));
        assert!(!interrupted(None, "b"));
    }
}
