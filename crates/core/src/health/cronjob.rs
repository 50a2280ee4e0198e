//! CronJob: suspended, failing its last run, or scheduling.

use serde_json::Value;

use super::field::{flag, text, timestamp};
use super::{Health, Subject};

/// Suspended → Suspended; its last run finished without success (the last
/// schedule is newer than the last success and nothing is running) →
/// Degraded; otherwise Healthy, saying what the schedule did last.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    if flag(object, "/spec/suspend") {
        return subject.suspended("schedule suspended");
    }
    let active = object
        .pointer("/status/active")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let last_schedule = text(object, "/status/lastScheduleTime");
    let last_success = text(object, "/status/lastSuccessfulTime");
    if active == 0
        && let (Some(scheduled), Some(succeeded)) =
            (timestamp(last_schedule), timestamp(last_success))
        && scheduled > succeeded
    {
        return subject.degraded(format!(
            "last run at {last_schedule} did not succeed (last success at {last_success})"
        ));
    }
    let detail = match (last_schedule, active) {
        ("", _) => "not scheduled yet".to_string(),
        (_, 0) if last_success.is_empty() => {
            format!("last run at {last_schedule}, none succeeded yet")
        }
        (_, 0) => format!("last run at {last_schedule}, last success at {last_success}"),
        (_, active) => format!("{active} job(s) running, last run at {last_schedule}"),
    };
    subject.healthy(detail)
}
