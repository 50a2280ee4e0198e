//! Signals from conditions of any type, by the polarity of the type's
//! words: good news (`Ready`, `Synced`, `Established`) False is trouble,
//! bad news (`Degraded`, `FetchFailed`, `ErrorOccurred`) True is failure,
//! work (`Reconciling`, `InstallPlanPending`) True is progress, a pause
//! (`Paused`, `cnpg.io/hibernation`) True is a suspension. The reason
//! (then the message) says which kind of trouble: `UpgradeFailed` is a
//! failure, `WaitingForInfrastructure` is progress.

use serde_json::Value;

use super::signal::{Signal, Weight};
use super::words::{Meaning, begins_underway, meaning, says_done};
use crate::conditions::ConditionStatus;

/// Types whose True means the whole object works, by convention.
const SUMMARY_TYPES: &[&str] = &[
    "Ready",
    "Available",
    "Healthy",
    "Succeeded",
    "Complete",
    "Completed",
];

/// Signals from the conditions in `conditions` (an array), whose fields
/// are named under `path` (`status.conditions`); `generation` is the
/// object's `metadata.generation`, against which each condition's own
/// `observedGeneration` is judged.
pub fn signals(conditions: &Value, path: &str, generation: Option<i64>, out: &mut Vec<Signal>) {
    let Some(conditions) = conditions.as_array() else {
        return;
    };
    let mut stale = Vec::new();
    let mut fresh = 0;
    for (index, condition) in conditions.iter().enumerate() {
        let text = |field: &str| condition.get(field).and_then(Value::as_str).unwrap_or("");
        let type_ = text("type");
        let status = text("status");
        if type_.is_empty() || status.is_empty() || superseded(conditions, index) {
            continue;
        }
        let reason = text("reason");
        let message = text("message");
        let said = if reason.is_empty() {
            format!("{path}[{type_}] = {status}")
        } else {
            format!("{path}[{type_}] = {status} ({reason})")
        };
        let observed = condition.get("observedGeneration").and_then(Value::as_i64);
        match (observed, generation) {
            (Some(observed), Some(generation)) if observed < generation => {
                stale.push(
                    Signal::new(
                        Weight::Underway,
                        format!("{said} describes generation {observed} of {generation}"),
                    )
                    .with_message(message),
                );
                continue;
            }
            (Some(_), Some(_)) => fresh += 1,
            _ => {}
        }
        let weight =
            judge(type_, ConditionStatus::read(status), reason, message).unwrap_or(Weight::Clear);
        out.push(Signal::new(weight, said).with_message(message));
    }
    // A condition about an older generation is superseded where others
    // describe the current one; where none does, the operator has not yet
    // looked at the latest spec.
    if fresh == 0 {
        out.extend(stale);
    }
}

/// Whether another condition of the same type in `conditions` changed
/// later (by `lastTransitionTime`; of equals, the last listed counts): an
/// operator that appends instead of replacing leaves its old word behind.
fn superseded(conditions: &[Value], index: usize) -> bool {
    let field = |at: usize, name: &str| -> &str {
        conditions[at]
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let type_ = field(index, "type");
    let mut time = None;
    (0..conditions.len()).any(|other| {
        if other == index || field(other, "type") != type_ {
            return false;
        }
        let mine = *time.get_or_insert_with(|| timestamp(field(index, "lastTransitionTime")));
        timestamp(field(other, "lastTransitionTime"))
            .cmp(&mine)
            .then(other.cmp(&index))
            .is_gt()
    })
}

/// A `lastTransitionTime` as Unix seconds; 0 if absent or unreadable.
fn timestamp(text: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(text).map_or(0, |time| time.timestamp())
}

/// What one condition says, if anything.
fn judge(type_: &str, status: ConditionStatus, reason: &str, message: &str) -> Option<Weight> {
    // What the reason (or, failing that, the message) says of trouble.
    let cause = || meaning(reason).or_else(|| meaning(message).filter(|m| *m == Meaning::Failure));
    let summary = SUMMARY_TYPES.contains(&type_);
    use ConditionStatus::{False, True};
    match (meaning(type_), status) {
        (Some(Meaning::Failure), True) => Some(Weight::Failure),
        (Some(Meaning::Failure | Meaning::Lacking), False) => Some(Weight::Clear),
        (Some(Meaning::Lacking), True) => Some(Weight::Lacking),
        (Some(Meaning::Paused), True) => Some(Weight::Paused),
        (Some(Meaning::Paused), _) => Some(Weight::Clear),
        (Some(Meaning::Underway), False) => match cause() {
            Some(Meaning::Failure) => Some(Weight::Failure),
            _ => Some(Weight::Clear),
        },
        (Some(Meaning::Underway), _) => Some(match cause() {
            Some(Meaning::Failure) => Weight::Failure,
            Some(Meaning::Paused) => Weight::Paused,
            _ if says_done(reason) => Weight::Good,
            _ => Weight::Underway,
        }),
        (Some(Meaning::Good), True) if summary => Some(Weight::Summary),
        (Some(Meaning::Good), True) if begins_underway(message) => Some(Weight::Underway),
        (Some(Meaning::Good), True) => Some(Weight::Good),
        (Some(Meaning::Good), False) => Some(match cause() {
            Some(Meaning::Failure) => Weight::Failure,
            Some(Meaning::Underway) => Weight::Underway,
            Some(Meaning::Paused) => Weight::Paused,
            Some(Meaning::Lacking) if summary => Weight::Withheld,
            _ => Weight::Lacking,
        }),
        (Some(Meaning::Good), _) => Some(match cause() {
            Some(Meaning::Failure) => Weight::Failure,
            Some(Meaning::Paused) => Weight::Paused,
            _ => Weight::Underway,
        }),
        // A type that says nothing by itself: only a named failure or a
        // pause in its reason counts.
        _ => match meaning(reason) {
            Some(Meaning::Failure) => Some(Weight::Failure),
            Some(Meaning::Paused) if status != False => Some(Weight::Paused),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Weight::{Clear, Failure, Good, Lacking, Paused, Summary, Underway, Withheld};

    /// Asserts the weight of each `(type, status, reason, weight)` case
    /// (a condition without a message).
    fn assert_weighs(cases: &[(&str, &str, &str, Weight)]) {
        for &(type_, status, reason, weight) in cases {
            assert_eq!(
                judge(type_, ConditionStatus::read(status), reason, ""),
                Some(weight),
                "{type_}={status} ({reason})"
            );
        }
    }

    #[test]
    fn good_news_false_is_a_failure_when_the_reason_names_one_and_progress_when_it_waits() {
        assert_weighs(&[
            ("Ready", "False", "UpgradeFailed", Failure),
            ("Ready", "False", "WaitingForInfrastructure", Underway),
            ("Ready", "False", "NotReady", Withheld),
            ("Synced", "False", "", Lacking),
            ("Ready", "Unknown", "RolloutInProgress", Underway),
        ]);
    }

    #[test]
    fn bad_news_true_is_a_failure_and_false_is_good() {
        assert_weighs(&[
            ("FetchFailed", "True", "", Failure),
            ("ErrorOccurred", "False", "", Clear),
            ("Stalled", "True", "Whatever", Failure),
        ]);
    }

    #[test]
    fn work_true_is_progress_unless_its_reason_says_it_is_done_or_failed() {
        assert_weighs(&[
            ("Reconciling", "True", "", Underway),
            ("Progressing", "True", "NewReplicaSetAvailable", Good),
            ("Progressing", "False", "ProgressDeadlineExceeded", Failure),
            ("Progressing", "Unknown", "RolloutPaused", Paused),
        ]);
    }

    #[test]
    fn of_two_conditions_of_one_type_the_later_transition_speaks() {
        let conditions = serde_json::json!([
            {"type": "Ready", "status": "False", "reason": "Failed", "lastTransitionTime": "2026-01-02T00:00:00Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ]);
        let mut out = Vec::new();
        signals(&conditions, "status.conditions", None, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].weight, Weight::Failure);
    }

    #[test]
    fn only_the_summary_types_true_are_summary_good_news() {
        assert_weighs(&[
            ("Ready", "True", "", Summary),
            ("Synced", "True", "", Good),
            ("Paused", "True", "PausedByUser", Paused),
        ]);
    }
}
