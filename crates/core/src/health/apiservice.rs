//! APIService: the aggregated API is reachable.

use serde_json::Value;

use super::field::describe;
use super::{Health, Subject};
use crate::conditions::{ConditionStatus, find_condition};

/// `Available` True → Healthy; otherwise Progressing with the reason.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    match find_condition(object, "Available") {
        Some(available) if available.status == ConditionStatus::True => {
            subject.healthy("available")
        }
        Some(available) => subject.progressing(format!("not available: {}", describe(&available))),
        None => subject.progressing("waiting for the Available condition"),
    }
}
