//! The Kubernetes Events a reconcile sends: a sync's outcome, drift
//! reverted or left alone, orphans found or pruned, a tripped breaker.
//! Each is sent once, when it first happens (a known drift or orphan is
//! not announced again); health changes and the `NotSyncedTooLong` alert
//! are read off the status before and after ([`announce_changes`]).
//! Repeats are aggregated by the [`Recorder`].

use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use crate::recorder::Recorder;
use tether_core::HealthStatus;
use tether_core::Initiator;
use tether_core::drift::DriftKind;
use tether_core::notice::{EventReason, Notice, NoticeKind, Severity};

use super::status::PRUNE_BLOCKED_CONDITION;
use crate::api::Application;
use crate::api::application::{ApplicationStatus, holds};
use crate::metrics::Metrics;
use crate::observe::drift::{Assessed, Response};
use crate::sync::Ran;
use crate::sync::prune::PruneReport;

/// One Event to send about an app: its type, reason and note.
type Said = (EventType, EventReason, String);

/// Events: a sync's outcome, drift reverted or left, a tripped breaker —
/// and the counters of drift, reverts and blocked prunes that go with them.
pub async fn announce(
    recorder: &Recorder,
    metrics: &Metrics,
    app: &Application,
    drift: &[Assessed],
    sync: Option<&Ran>,
    pruned: &PruneReport,
) {
    let previous = app.status.as_ref();
    let healed = sync.is_some_and(|s| s.result.is_ok());
    let key = (app.namespace().unwrap_or_default(), app.name_any());
    let mut said = Vec::new();
    for assessed in drift {
        let known = previous.is_some_and(|p| {
            p.drift.iter().any(|e| {
                e.record.object == assessed.record.object
                    && e.record.fields == assessed.record.fields
            })
        });
        if !known {
            metrics.drift_detected(&key, assessed.record.kind);
        }
        if healed && matches!(assessed.response, Response::Heal) {
            metrics.self_healed(&key);
        }
        said.extend(drift_event(assessed, known, healed));
    }
    said.extend(sync.and_then(sync_event));
    said.extend(orphan_events(pruned, previous));
    let was_blocked = previous.is_some_and(|p| holds(&p.conditions, PRUNE_BLOCKED_CONDITION));
    if let Some(breaker) = &pruned.breaker
        && !was_blocked
    {
        metrics.prune_blocked(&key);
        said.push((
            EventType::Warning,
            EventReason::PruneBlocked,
            breaker.to_string(),
        ));
    }
    for (type_, reason, note) in said {
        publish(recorder, app, type_, reason, note).await;
    }
}

/// The Event for one drifted object: reverted (when the sync that healed
/// it succeeded), kept by an open break-glass window, left in place, or
/// self-heal backing off; none for a drift already announced.
fn drift_event(assessed: &Assessed, known: bool, healed: bool) -> Option<Said> {
    Some(match &assessed.response {
        Response::Heal if healed => (
            EventType::Normal,
            EventReason::DriftReverted,
            format!("reverted {assessed}"),
        ),
        Response::Heal => return None,
        _ if known => return None,
        Response::Report if assessed.record.kind == DriftKind::Emergency => (
            EventType::Warning,
            EventReason::EmergencyChange,
            format!("{assessed}; inside an open break-glass window: recorded, not reverted"),
        ),
        Response::Report => (
            EventType::Warning,
            EventReason::DriftDetected,
            format!("{assessed}; not reverted (self-heal is off, warn mode or opted out)"),
        ),
        Response::BackOff(fight) => (
            EventType::Warning,
            EventReason::SelfHealBackOff,
            fight.to_string(),
        ),
    })
}

/// The Event for a sync that ended: none for a self-heal that succeeded
/// (its reverts say it) or a sync waiting for a wave (it resumes).
fn sync_event(sync: &Ran) -> Option<Said> {
    match sync {
        Ran {
            initiator: Initiator::SelfHeal,
            result: Ok(_),
            ..
        } => None,
        Ran {
            result: Ok(report), ..
        } => Some((
            EventType::Normal,
            EventReason::SyncSucceeded,
            format!("synced {} object(s)", report.results.len()),
        )),
        Ran {
            result: Err(error), ..
        } if error.is_waiting() => None,
        Ran {
            result: Err(error), ..
        } => Some((
            EventType::Warning,
            EventReason::SyncFailed,
            error.to_string(),
        )),
    }
}

/// An Event for each orphan pruned, and for each orphan kept that was not
/// on record before.
fn orphan_events(pruned: &PruneReport, previous: Option<&ApplicationStatus>) -> Vec<Said> {
    let mut said = Vec::new();
    for (object, fate) in &pruned.orphans {
        let before =
            previous.and_then(|p| p.orphans.iter().find(|o| o.object == object.to_string()));
        if fate.is_deleted() {
            said.push((
                EventType::Normal,
                EventReason::Pruned,
                format!("{object}: deleted"),
            ));
        } else if before.is_none() {
            said.push((
                EventType::Normal,
                EventReason::OrphanDetected,
                format!("{object}: no longer in Git; {fate}"),
            ));
        }
    }
    said
}

/// Publishes one Event about `app`'s sync; a failure to publish is only
/// logged.
pub async fn publish(
    recorder: &Recorder,
    app: &Application,
    type_: EventType,
    reason: EventReason,
    note: String,
) {
    recorder
        .tell(&app.object_ref(&()), type_, reason, "Sync", note)
        .await;
}

/// Events for what changed between two statuses: health moved, and the
/// `NotSyncedTooLong` alert raised or cleared (from `notices`).
pub async fn announce_changes(
    recorder: &Recorder,
    app: &Application,
    previous: Option<&ApplicationStatus>,
    next: &ApplicationStatus,
    notices: &[Notice],
) {
    if let Some(previous) = previous
        && previous.health.status != next.health.status
        && next.health.status != HealthStatus::Unknown
    {
        let type_ = match next.health.status {
            HealthStatus::Degraded | HealthStatus::Missing => EventType::Warning,
            _ => EventType::Normal,
        };
        let message = match next.health.message.lines().next() {
            Some(message) if !message.is_empty() => format!(": {message}"),
            _ => String::new(),
        };
        let note = format!(
            "{} → {}{message}",
            previous.health.status, next.health.status
        );
        publish(recorder, app, type_, EventReason::HealthChanged, note).await;
    }
    for notice in notices {
        let reason = match notice.kind {
            NoticeKind::NotSyncedTooLong => EventReason::NotSyncedTooLong,
            NoticeKind::NotSyncedTooLongCleared => EventReason::NotSyncedTooLongCleared,
            _ => continue,
        };
        let type_ = match notice.severity {
            Severity::Warning => EventType::Warning,
            Severity::Normal => EventType::Normal,
        };
        publish(recorder, app, type_, reason, notice.message.clone()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_core::ObjectRef;
    use tether_core::drift::DriftRecord;

    fn drifted(kind: DriftKind, response: Response) -> Assessed {
        let object = ObjectRef::from_object(&serde_json::json!({"apiVersion": "apps/v1",
            "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}}))
        .unwrap();
        Assessed {
            record: DriftRecord {
                object,
                kind,
                fields: Vec::new(),
                detected_at: "2026-12-06T10:00:00Z".into(),
            },
            response,
        }
    }

    fn reason(event: Option<Said>) -> Option<EventReason> {
        event.map(|(_, reason, _)| reason)
    }

    #[test]
    fn a_drift_is_said_reverted_only_once_the_healing_sync_succeeded() {
        let manual = drifted(DriftKind::Manual, Response::Heal);
        assert_eq!(
            reason(drift_event(&manual, true, true)),
            Some(EventReason::DriftReverted)
        );
        assert_eq!(reason(drift_event(&manual, false, false)), None);
    }

    #[test]
    fn a_drift_left_in_place_is_said_once_and_a_break_glass_change_as_an_emergency() {
        let left = drifted(DriftKind::Manual, Response::Report);
        assert_eq!(
            reason(drift_event(&left, false, false)),
            Some(EventReason::DriftDetected)
        );
        assert_eq!(reason(drift_event(&left, true, false)), None);
        let emergency = drifted(DriftKind::Emergency, Response::Report);
        let (type_, reason, note) = drift_event(&emergency, false, false).unwrap();
        assert_eq!(
            (type_, reason),
            (EventType::Warning, EventReason::EmergencyChange)
        );
        assert!(note.contains("Deployment shop/web"), "{note}");
    }
}
