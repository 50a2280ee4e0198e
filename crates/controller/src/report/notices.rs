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
use tether_core::ConditionStatus::{False, True, Unknown};

/// The notices for `app` going from `previous` to `next` at `now`, in
/// this order: its state, the not-Synced alert, a self-heal fight, drift
/// left in place, a failed sync.
pub fn notices(
    app: &Application,
    previous: Option<&ApplicationStatus>,
    next: &ApplicationStatus,
    now: &str,
) -> Vec<Notice> {
    let told = [
        state_changed(previous, next, now),
        not_synced_alert(previous, next, now),
        self_heal_fight(previous, next),
    ];
    told.into_iter()
        .flatten()
        .chain(drift_left(previous, next))
        .chain(sync_failed(previous, next))
        .map(|told| told.about(app, next, now))
        .collect()
}

/// What one notice says, before it is addressed to its app.
struct Told {
    kind: NoticeKind,
    severity: Severity,
    message: String,
    /// What makes the notice one of a kind, after the app and the kind.
    key: String,
    previous_state: Option<OperationalState>,
    /// The revision it is about, when not the one synced.
    revision: Option<String>,
}

impl Told {
    fn new(kind: NoticeKind, severity: Severity, message: String, key: String) -> Self {
        Told {
            kind,
            severity,
            message,
            key,
            previous_state: None,
            revision: None,
        }
    }

    /// The notice of `app`, whose status is now `next`.
    fn about(self, app: &Application, next: &ApplicationStatus, now: &str) -> Notice {
        let uid = app.metadata.uid.as_deref().unwrap_or_default();
        Notice {
            kind: self.kind,
            severity: self.severity,
            namespace: app.namespace().unwrap_or_default(),
            name: app.name_any(),
            labels: app.labels().clone().into_iter().collect::<BTreeMap<_, _>>(),
            message: self.message,
            revision: self.revision.or_else(|| next.sync.revision.clone()),
            state: next.state,
            previous_state: self.previous_state,
            at: now.to_string(),
            key: format!("{uid}/{}/{}", self.kind, self.key),
        }
    }
}

/// The operational state changed: a warning unless it is now Converged.
fn state_changed(
    previous: Option<&ApplicationStatus>,
    next: &ApplicationStatus,
    now: &str,
) -> Option<Told> {
    let from = previous.and_then(|p| p.state)?;
    let to = next.state.filter(|to| *to != from)?;
    let severity = match to {
        OperationalState::Converged => Severity::Normal,
        _ => Severity::Warning,
    };
    let at = next.reconciled_at.as_deref().unwrap_or(now);
    Some(Told {
        previous_state: Some(from),
        ..Told::new(
            NoticeKind::StateChanged,
            severity,
            format!("{from} → {to}{}", why(next)),
            format!("{from}-{to}-{at}"),
        )
    })
}

/// Condition `NotSyncedTooLong` was raised, or cleared.
fn not_synced_alert(
    previous: Option<&ApplicationStatus>,
    next: &ApplicationStatus,
    now: &str,
) -> Option<Told> {
    let was = previous.is_some_and(|p| holds(&p.conditions, NOT_SYNCED_TOO_LONG_CONDITION));
    let alert = condition(&next.conditions, NOT_SYNCED_TOO_LONG_CONDITION)?;
    match (was, alert.status) {
        (false, True) => Some(Told::new(
            NoticeKind::NotSyncedTooLong,
            Severity::Warning,
            alert.message.clone(),
            next.sync
                .not_synced_since
                .as_deref()
                .unwrap_or(now)
                .to_string(),
        )),
        (true, False | Unknown) => {
            let since = previous
                .and_then(|p| p.sync.not_synced_since.as_deref())
                .unwrap_or(now);
            Some(Told::new(
                NoticeKind::NotSyncedTooLongCleared,
                Severity::Normal,
                format!("Synced again (not Synced since {since})"),
                since.to_string(),
            ))
        }
        _ => None,
    }
}

/// Self-heal began backing off from another writer.
fn self_heal_fight(previous: Option<&ApplicationStatus>, next: &ApplicationStatus) -> Option<Told> {
    if previous.is_some_and(|p| holds(&p.conditions, BACK_OFF_CONDITION)) {
        return None;
    }
    let fight = condition_with(&next.conditions, BACK_OFF_CONDITION, True)?;
    Some(Told::new(
        NoticeKind::SelfHealFighting,
        Severity::Warning,
        fight.message.clone(),
        fight.last_transition_time.clone().unwrap_or_default(),
    ))
}

/// Drift newly left in place (healed drift is counted in metrics and
/// Events, not notified: a flapping field would page on every revert).
fn drift_left<'a>(
    previous: Option<&'a ApplicationStatus>,
    next: &'a ApplicationStatus,
) -> impl Iterator<Item = Told> + 'a {
    let known = previous.map(|p| p.drift.as_slice()).unwrap_or_default();
    next.drift
        .iter()
        .filter(move |entry| {
            entry.response != DriftOutcome::Healed
                && !known.iter().any(|k| {
                    k.record.object == entry.record.object && k.record.fields == entry.record.fields
                })
        })
        .map(|entry| {
            let record = &entry.record;
            let fields: Vec<&str> = record.fields.iter().map(|f| f.path.as_str()).collect();
            let what = match fields.as_slice() {
                [] => "missing".to_string(),
                some => some.join(", "),
            };
            Told::new(
                NoticeKind::DriftDetected,
                Severity::Warning,
                format!(
                    "{} drift on {}: {what} ({})",
                    record.kind, record.object, entry.response
                ),
                format!("{}/{}", record.object, record.detected_at),
            )
        })
}

/// A sync failed, unless the same failure was told last time.
fn sync_failed(previous: Option<&ApplicationStatus>, next: &ApplicationStatus) -> Option<Told> {
    let operation = next
        .operation_state
        .as_ref()
        .filter(|o| o.phase == OperationPhase::Failed)?;
    let repeated = previous
        .and_then(|p| p.operation_state.as_ref())
        .is_some_and(|p| {
            p.phase == OperationPhase::Failed
                && p.revision == operation.revision
                && p.message == operation.message
        });
    if repeated {
        return None;
    }
    Some(Told {
        revision: Some(operation.revision.clone()),
        ..Told::new(
            NoticeKind::SyncFailed,
            Severity::Warning,
            first_line(&operation.message).to_string(),
            format!("{}/{}", operation.revision, operation.started_at),
        )
    })
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
