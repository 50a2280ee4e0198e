//! CustomResourceDefinition: names accepted and established.

use serde_json::Value;

use super::field::describe;
use super::{Health, Subject};
use crate::conditions::{ConditionStatus, find_condition};

/// Terminating, installing or without conditions → Progressing; names not
/// accepted, schema violations or not established → Degraded; otherwise
/// Healthy.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    let has_conditions = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|conditions| !conditions.is_empty());
    if !has_conditions {
        return subject.progressing("installing: no status conditions yet");
    }
    if let Some(terminating) = find_condition(object, "Terminating")
        && terminating.status == ConditionStatus::True
    {
        return subject.progressing(format!("terminating: {}", describe(&terminating)));
    }
    if let Some(names) = find_condition(object, "NamesAccepted")
        && names.status == ConditionStatus::False
    {
        return subject.degraded(format!("names not accepted: {}", describe(&names)));
    }
    if let Some(violation) = find_condition(object, "NonStructuralSchema")
        && violation.status == ConditionStatus::True
    {
        return subject.degraded(format!("schema violations: {}", describe(&violation)));
    }
    match find_condition(object, "Established") {
        Some(established) if established.status == ConditionStatus::True => {
            subject.healthy("established")
        }
        Some(established) if established.reason == "Installing" => {
            subject.progressing(format!("installing: {}", describe(&established)))
        }
        Some(established) => {
            subject.degraded(format!("not established: {}", describe(&established)))
        }
        None => subject.progressing("installing: not established yet"),
    }
}
