//! The generic conditions check, for kinds without a check of their own
//! that follow the common conventions (as kstatus does): `Stalled`,
//! `Reconciling`, `Ready`, `Available` and `observedGeneration`.

use serde_json::Value;

use super::field::{describe, generation_not_observed};
use super::{Health, Subject};
use crate::conditions::find_condition;

/// `Stalled` True → Degraded; spec not yet observed or `Reconciling` True
/// → Progressing; `Ready`/`Available` False → Progressing (Degraded if
/// its reason says it failed); otherwise Healthy.
///
/// Returns `None` when the object follows none of the conventions (no
/// `status.conditions`, no `status.observedGeneration`): there is nothing
/// to judge it by, so it has no health.
pub(super) fn assess(object: &Value) -> Option<Health> {
    let status = object.get("status")?;
    let has_conditions = status
        .get("conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| !conditions.is_empty());
    if !has_conditions && status.get("observedGeneration").is_none() {
        return None;
    }
    let subject = Subject::of(object);
    Some(judge(object, &subject))
}

fn judge(object: &Value, subject: &Subject) -> Health {
    if let Some(stalled) = find_condition(object, "Stalled")
        && stalled.status == "True"
    {
        return subject.degraded(format!("stalled: {}", describe(&stalled)));
    }
    if generation_not_observed(object) {
        return subject.progressing("waiting for the controller to observe the latest spec");
    }
    if let Some(reconciling) = find_condition(object, "Reconciling")
        && reconciling.status == "True"
    {
        return subject.progressing(format!("reconciling: {}", describe(&reconciling)));
    }
    for type_ in ["Ready", "Available"] {
        let Some(condition) = find_condition(object, type_) else {
            continue;
        };
        match condition.status {
            "True" => return subject.healthy(format!("{type_}: {}", describe(&condition))),
            "False" if looks_failed(condition.reason) => {
                return subject.degraded(format!(
                    "not {}: {}",
                    type_.to_lowercase(),
                    describe(&condition)
                ));
            }
            _ => {
                return subject.progressing(format!(
                    "not {} yet: {}",
                    type_.to_lowercase(),
                    describe(&condition)
                ));
            }
        }
    }
    subject.healthy("")
}

/// Reasons that, by convention, mean a failure rather than work in
/// progress.
fn looks_failed(reason: &str) -> bool {
    ["Failed", "Failure", "Error", "Invalid"]
        .iter()
        .any(|word| reason.contains(word))
}
