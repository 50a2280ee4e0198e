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
use crate::api::application::ApplicationStatus;
use crate::metrics::Metrics;
use crate::observe::drift::{Assessed, Response};
use crate::sync::Ran;
use crate::sync::prune::PruneReport;

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
        match &assessed.response {
            Response::Heal if healed => {
                publish(
                    recorder,
                    app,
                    EventType::Normal,
                    EventReason::DriftReverted,
                    format!("reverted {assessed}"),
                )
                .await
            }
            Response::Heal => {}
            _ if known => {}
            Response::Report if assessed.record.kind == DriftKind::Emergency => {
                publish(
                    recorder,
                    app,
                    EventType::Warning,
                    EventReason::EmergencyChange,
                    format!(
                        "{assessed}; inside an open break-glass window: recorded, not reverted"
                    ),
                )
                .await
            }
            Response::Report => {
                publish(
                    recorder,
                    app,
                    EventType::Warning,
                    EventReason::DriftDetected,
                    format!("{assessed}; not reverted (self-heal is off, warn mode or opted out)"),
                )
                .await
            }
            Response::BackOff(fight) => {
                publish(
                    recorder,
                    app,
                    EventType::Warning,
                    EventReason::SelfHealBackOff,
                    fight.to_string(),
                )
                .await
            }
        }
    }
    match sync {
        Some(Ran {
            initiator: Initiator::SelfHeal,
            result: Ok(_),
            ..
        }) => {}
        Some(Ran {
            result: Ok(report), ..
        }) => {
            publish(
                recorder,
                app,
                EventType::Normal,
                EventReason::SyncSucceeded,
                format!("synced {} object(s)", report.results.len()),
            )
            .await
        }
        // Not over: it resumes at the next reconcile (status says so).
        Some(Ran {
            result: Err(error), ..
        }) if error.is_waiting() => {}
        Some(Ran {
            result: Err(error), ..
        }) => {
            publish(
                recorder,
                app,
                EventType::Warning,
                EventReason::SyncFailed,
                error.to_string(),
            )
            .await
        }
        None => {}
    }
    for (object, fate) in &pruned.orphans {
        let before =
            previous.and_then(|p| p.orphans.iter().find(|o| o.object == object.to_string()));
        if fate.is_deleted() {
            publish(
                recorder,
                app,
                EventType::Normal,
                EventReason::Pruned,
                format!("{object}: deleted"),
            )
            .await;
        } else if before.is_none() {
            publish(
                recorder,
                app,
                EventType::Normal,
                EventReason::OrphanDetected,
                format!("{object}: no longer in Git; {fate}"),
            )
            .await;
        }
    }
    let was_blocked = previous.is_some_and(|p| {
        p.conditions
            .iter()
            .any(|c| c.type_ == PRUNE_BLOCKED_CONDITION && c.status == "True")
    });
    if let Some(breaker) = &pruned.breaker
        && !was_blocked
    {
        metrics.prune_blocked(&key);
        publish(
            recorder,
            app,
            EventType::Warning,
            EventReason::PruneBlocked,
            breaker.to_string(),
        )
        .await;
    }
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
