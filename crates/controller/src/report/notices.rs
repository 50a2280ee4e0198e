//! What a reconcile changed that people are told about: the notices
//! (`tether_core::notice`) read off the status before and after, so the
//! same change is announced once — as an Event and as a notification —
//! whichever path of the reconcile wrote it.

use std::collections::BTreeMap;

use kube::ResourceExt;
use tether_core::drift::DriftOutcome;
use tether_core::notice::{Notice, NoticeKind, Severity};
use tether_core::{OperationPhase, OperationalState};

use super::status::{BACK_OFF_CONDITION, NOT_SYNCED_TOO_LONG_CONDITION};
use crate::api::Application;
use crate::api::application::{ApplicationStatus, condition, condition_with, holds};
use tether_core::ConditionStatus::{False, True};

/// The notices for `app` going from `previous` to `next` at `now`.
pub fn notices(
    app: &Application,
    previous: Option<&ApplicationStatus>,
    next: &ApplicationStatus,
    now: &str,
) -> Vec<Notice> {
    let uid = app.metadata.uid.clone().unwrap_or_default();
    let notice = |kind: NoticeKind, severity: Severity, message: String, key: String| Notice {
        kind,
        severity,
        namespace: app.namespace().unwrap_or_default(),
        name: app.name_any(),
        labels: app.labels().clone().into_iter().collect::<BTreeMap<_, _>>(),
        message,
        revision: next.sync.revision.clone(),
        state: next.state,
        previous_state: None,
        at: now.to_string(),
        key: format!("{uid}/{kind}/{key}"),
    };
    let mut out = Vec::new();

    let before = previous.and_then(|p| p.state);
    if let (Some(from), Some(to)) = (before, next.state)
        && from != to
    {
        let severity = match to {
            OperationalState::Converged => Severity::Normal,
            _ => Severity::Warning,
        };
        let why = why(next);
        out.push(Notice {
            previous_state: Some(from),
            ..notice(
                NoticeKind::StateChanged,
                severity,
                format!("{from} → {to}{why}"),
                format!(
                    "{from}-{to}-{}",
                    next.reconciled_at.as_deref().unwrap_or(now)
                ),
            )
        });
    }

    let was = |type_: &str| previous.is_some_and(|p| holds(&p.conditions, type_));
    let alert = condition(&next.conditions, NOT_SYNCED_TOO_LONG_CONDITION);
    let since = next.sync.not_synced_since.as_deref();
    match (was(NOT_SYNCED_TOO_LONG_CONDITION), alert) {
        (false, Some(raised)) if raised.status == True => out.push(notice(
            NoticeKind::NotSyncedTooLong,
            Severity::Warning,
            raised.message.clone(),
            since.unwrap_or(now).to_string(),
        )),
        (true, Some(cleared)) if cleared.status != True => {
            let since = previous
                .and_then(|p| p.sync.not_synced_since.as_deref())
                .unwrap_or(now);
            out.push(notice(
                NoticeKind::NotSyncedTooLongCleared,
                Severity::Normal,
                format!("Synced again (not Synced since {since})"),
                since.to_string(),
            ))
        }
        _ => {}
    }

    if !was(BACK_OFF_CONDITION)
        && let Some(fight) = condition_with(&next.conditions, BACK_OFF_CONDITION, True)
    {
        out.push(notice(
            NoticeKind::SelfHealFighting,
            Severity::Warning,
            fight.message.clone(),
            fight.last_transition_time.clone().unwrap_or_default(),
        ));
    }

    // Drift left in place (healed drift is counted in metrics and Events,
    // not notified: a flapping field would page on every revert).
    let known = previous.map(|p| p.drift.as_slice()).unwrap_or_default();
    for entry in &next.drift {
        let seen = known.iter().any(|k| {
            k.record.object == entry.record.object && k.record.fields == entry.record.fields
        });
        if seen || entry.response == DriftOutcome::Healed {
            continue;
        }
        let fields: Vec<&str> = entry
            .record
            .fields
            .iter()
            .map(|f| f.path.as_str())
            .collect();
        let what = match fields.as_slice() {
            [] => "missing".to_string(),
            some => some.join(", "),
        };
        out.push(notice(
            NoticeKind::DriftDetected,
            Severity::Warning,
            format!(
                "{} drift on {}: {what} ({})",
                entry.record.kind, entry.record.object, entry.response
            ),
            format!("{}/{}", entry.record.object, entry.record.detected_at),
        ));
    }

    if let Some(operation) = &next.operation_state
        && operation.phase == OperationPhase::Failed
    {
        let repeated = previous
            .and_then(|p| p.operation_state.as_ref())
            .is_some_and(|p| {
                p.phase == OperationPhase::Failed
                    && p.revision == operation.revision
                    && p.message == operation.message
            });
        if !repeated {
            out.push(Notice {
                revision: Some(operation.revision.clone()),
                ..notice(
                    NoticeKind::SyncFailed,
                    Severity::Warning,
                    operation
                        .message
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                    format!("{}/{}", operation.revision, operation.started_at),
                )
            });
        }
    }
    out
}

/// `: reason` for a state that is not Converged, from the condition that
/// says why, else the health message.
fn why(status: &ApplicationStatus) -> String {
    let failed = condition_with(
        &status.conditions,
        super::status::RECONCILED_CONDITION,
        False,
    );
    match failed {
        Some(c) => format!(": {}: {}", c.reason, first_line(&c.message)),
        None if status.state != Some(OperationalState::Converged)
            && !status.health.message.is_empty() =>
        {
            format!(": {}", first_line(&status.health.message))
        }
        None => String::new(),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::application::Condition;
    use serde_json::json;
    use tether_core::{ConditionStatus, SyncStatus};

    fn app() -> Application {
        serde_json::from_value(json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "apps", "uid": "u1",
                "labels": {"team": "payments"}},
            "spec": {"source": {"repoURL": "https://git.example/shop.git"},
                "destination": {"namespace": "shop"}}
        }))
        .unwrap()
    }

    fn reported(type_: &str, status: ConditionStatus, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status,
            reason: "ValidationFailed".into(),
            message: message.into(),
            last_transition_time: None,
        }
    }

    #[test]
    fn raising_and_clearing_the_alert_are_one_notice_each_with_a_stable_key() {
        let mut before = ApplicationStatus {
            state: Some(OperationalState::Broken),
            ..ApplicationStatus::default()
        };
        before.sync.not_synced_since = Some("2026-12-03T10:00:00Z".into());
        let mut raised = before.clone();
        raised.conditions = vec![reported(
            NOT_SYNCED_TOO_LONG_CONDITION,
            True,
            "not Synced for more than 5s (since 2026-12-03T10:00:00Z): bad",
        )];
        let found = notices(&app(), Some(&before), &raised, "2026-12-03T10:00:06Z");
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kind, NoticeKind::NotSyncedTooLong);
        assert_eq!(found[0].severity, Severity::Warning);
        assert_eq!(found[0].key, "u1/not-synced-too-long/2026-12-03T10:00:00Z");
        assert_eq!(found[0].labels["team"], "payments");
        assert!(notices(&app(), Some(&raised), &raised, "2026-12-03T10:00:09Z").is_empty());

        let mut fixed = raised.clone();
        fixed.sync.not_synced_since = None;
        fixed.sync.status = SyncStatus::Synced;
        fixed.state = Some(OperationalState::Converged);
        fixed.conditions = vec![reported(NOT_SYNCED_TOO_LONG_CONDITION, False, "")];
        let kinds: Vec<NoticeKind> = notices(&app(), Some(&raised), &fixed, "2026-12-03T10:00:20Z")
            .iter()
            .map(|n| n.kind)
            .collect();
        assert_eq!(
            kinds,
            [
                NoticeKind::StateChanged,
                NoticeKind::NotSyncedTooLongCleared
            ]
        );
    }

    #[test]
    fn drift_left_in_place_is_notified_once_by_path_and_healed_drift_not_at_all() {
        let drift = |response| {
            serde_json::from_value::<crate::api::application::DriftEntry>(json!({
                "object": {"group": "apps", "kind": "Deployment",
                    "namespace": "shop", "name": "web"},
                "kind": "Manual", "detectedAt": "2026-12-03T10:00:00Z",
                "fields": [{"path": "spec.replicas", "pointer": "/spec/replicas",
                    "desired": 2, "live": 5}],
                "response": response
            }))
            .unwrap()
        };
        let before = ApplicationStatus::default();
        let mut kept = before.clone();
        kept.drift = vec![drift("Reported")];
        let found = notices(&app(), Some(&before), &kept, "2026-12-03T10:00:01Z");
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].message,
            "Manual drift on Deployment shop/web: spec.replicas (Reported)"
        );
        assert!(
            !found[0].message.contains('5'),
            "values never leave the cluster"
        );
        assert!(notices(&app(), Some(&kept), &kept, "2026-12-03T10:00:02Z").is_empty());
        let mut healed = before.clone();
        healed.drift = vec![drift("Healed")];
        assert!(notices(&app(), Some(&before), &healed, "2026-12-03T10:00:01Z").is_empty());
    }
}
