//! Job: failed, complete, suspended, or running.

use serde_json::Value;

use super::field::{flag, int, int_or_zero};
use super::{Health, Subject};
use crate::conditions::{ConditionStatus, find_condition};

/// `Failed` → Degraded; `Complete` → Healthy; suspended and acknowledged
/// by the controller → Suspended; on its way into or out of suspension, or
/// still running → Progressing.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    let is_true =
        |type_: &str| find_condition(object, type_).filter(|c| c.status == ConditionStatus::True);
    if let Some(failed) = is_true("Failed") {
        let detail = if failed.message.is_empty() {
            failed.reason
        } else {
            failed.message
        };
        return subject.degraded(format!("failed: {detail}"));
    }
    if is_true("Complete").is_some() {
        let succeeded = int_or_zero(object, "/status/succeeded");
        return subject.healthy(format!("completed ({succeeded} succeeded)"));
    }
    let want_suspended = flag(object, "/spec/suspend");
    let suspended = is_true("Suspended");
    match (want_suspended, suspended) {
        (true, Some(condition)) => {
            let detail = if condition.message.is_empty() {
                "Job suspended"
            } else {
                condition.message
            };
            return subject.suspended(detail);
        }
        (true, None) => return subject.progressing("suspending"),
        (false, Some(_)) => return subject.progressing("resuming"),
        (false, None) => {}
    }
    let active = int_or_zero(object, "/status/active");
    let succeeded = int_or_zero(object, "/status/succeeded");
    match int(object, "/spec/completions") {
        Some(completions) => subject.progressing(format!(
            "running: {succeeded}/{completions} completions, {active} active"
        )),
        None => subject.progressing(format!("running: {active} active")),
    }
}
