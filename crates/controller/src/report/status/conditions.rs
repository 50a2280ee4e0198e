//! The conditions a reconcile sets: `Reconciled`, `HealthRules`, the
//! problem conditions (True while the problem lasts) and
//! `NotSyncedTooLong` with why the app is not Synced.

use std::time::Duration;

use tether_core::SyncStatus;
use tether_core::alert;
use tether_core::argocd::Warning;
use tether_core::drift::{DriftKind, DriftOutcome};

use crate::api::application::{
    ApplicationStatus, Condition, DriftEntry, condition, condition_with, set_condition,
};
use crate::observe::health::{self, Judge};
use tether_core::ConditionStatus::{False, True};

use super::{
    Failure, NOT_SYNCED_TOO_LONG_CONDITION, NotSyncedReason, RECONCILED_CONDITION,
    RECONCILED_REASON,
};

/// At most this many warnings are spelled out in the message.
const UNSUPPORTED_SHOWN: usize = 10;

pub(super) fn set_reconciled_condition(
    conditions: &mut Vec<Condition>,
    failure: Option<&Failure>,
    now: &str,
) {
    let (value, reason, message) = match failure {
        Some(failure) => (False, failure.step.as_str(), failure.message.clone()),
        None => (True, RECONCILED_REASON, String::new()),
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

/// `HealthRules`: True when every rule in force compiled; False, naming
/// each rule left out, when some did not.
pub(super) fn set_health_rules_condition(
    conditions: &mut Vec<Condition>,
    judge: &Judge,
    now: &str,
) {
    let problems = judge.problems();
    let (value, reason, message) = if problems.is_empty() {
        (True, "Loaded", judge.summary())
    } else {
        (False, "RulesLeftOut", problems.join("; "))
    };
    set_condition(conditions, health::CONDITION, value, reason, message, now);
}

/// Sets condition `type_` True with `message`, or False when `None`
/// (added only once it has been True).
pub(super) fn set_problem_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    reason: &str,
    message: Option<String>,
    now: &str,
) {
    match message {
        Some(message) => set_condition(conditions, type_, True, reason, message, now),
        None if condition(conditions, type_).is_some() => {
            set_condition(conditions, type_, False, "Resolved", String::new(), now);
        }
        None => {}
    }
}

/// The `Unsupported` condition's message: each warning, at most
/// [`UNSUPPORTED_SHOWN`]; `None` when there is none.
pub(super) fn unsupported_message(warnings: &[Warning]) -> Option<String> {
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

/// Product rule 5: `sync.notSyncedSince` follows whether the app is Synced
/// (live matches Git and no step of the reconcile fails), and
/// [`NOT_SYNCED_TOO_LONG_CONDITION`] is True — saying since when and why —
/// while that has lasted longer than `alert_after`; False once Synced.
pub(super) fn set_not_synced_condition(
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
    if let Some(pinned) =
        condition_with(&status.conditions, crate::api::pin::PINNED_CONDITION, True)
    {
        return (NotSyncedReason::Pinned.as_str(), pinned.message.clone());
    }
    // Drift left in place, by why it is left, the first that applies.
    type Kept = (NotSyncedReason, &'static str, fn(&DriftEntry) -> bool);
    let kept: [Kept; 3] = [
        (
            NotSyncedReason::BreakGlassOpen,
            "changes made in an open break-glass window are kept",
            |entry| entry.record.kind == DriftKind::Emergency,
        ),
        (
            NotSyncedReason::SelfHealBackOff,
            "self-heal backed off from another writer",
            |entry| entry.response == DriftOutcome::BackedOff,
        ),
        (
            NotSyncedReason::DriftKept,
            "drift is reported and left in place (self-heal off or driftResponse: warn)",
            |entry| entry.response == DriftOutcome::Reported,
        ),
    ];
    for (reason, said, applies) in kept {
        let objects: Vec<String> = status
            .drift
            .iter()
            .filter(|entry| applies(entry))
            .map(|entry| entry.record.object.to_string())
            .collect();
        if !objects.is_empty() {
            return (reason.as_str(), format!("{said}: {}", named(&objects)));
        }
    }
    match status.sync.status {
        SyncStatus::OutOfSync => (
            NotSyncedReason::SyncPending.as_str(),
            "live state differs from Git and no sync has applied it (automated sync off? run `tether sync`)"
                .to_string(),
        ),
        _ => (
            NotSyncedReason::NotCompared.as_str(),
            "live state has not been compared with Git yet".to_string(),
        ),
    }
}

/// The first three of `objects`, and how many more.
fn named(objects: &[String]) -> String {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_core::ObjectRef;
    use tether_core::drift::DriftRecord;

    fn drifted(name: &str, kind: DriftKind, response: DriftOutcome) -> DriftEntry {
        DriftEntry {
            record: DriftRecord {
                object: ObjectRef {
                    group: "apps".into(),
                    kind: "Deployment".into(),
                    namespace: Some("shop".into()),
                    name: name.into(),
                },
                kind,
                fields: Vec::new(),
                detected_at: "2026-12-06T09:00:00Z".into(),
            },
            response,
            resolved_at: None,
        }
    }

    #[test]
    fn drift_kept_by_break_glass_is_named_before_a_back_off_and_a_report() {
        let mut status = ApplicationStatus::default();
        status.sync.status = SyncStatus::OutOfSync;
        status.drift = vec![
            drifted("a", DriftKind::Manual, DriftOutcome::Reported),
            drifted("b", DriftKind::Manual, DriftOutcome::BackedOff),
            drifted("c", DriftKind::Emergency, DriftOutcome::Reported),
        ];
        let said = |status: &ApplicationStatus| why_not_synced(status, None);
        assert_eq!(said(&status).0, NotSyncedReason::BreakGlassOpen.as_str());
        assert!(said(&status).1.ends_with("are kept: Deployment shop/c"));
        status.drift.pop();
        assert_eq!(said(&status).0, NotSyncedReason::SelfHealBackOff.as_str());
        status.drift.pop();
        assert_eq!(said(&status).0, NotSyncedReason::DriftKept.as_str());
        status.drift.clear();
        assert_eq!(said(&status).0, NotSyncedReason::SyncPending.as_str());
    }

    #[test]
    fn more_than_three_objects_are_counted_not_listed() {
        let objects: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        assert_eq!(named(&objects), "a, b, c and 2 more");
        assert_eq!(named(&objects[..3]), "a, b, c");
    }
}
