//! HorizontalPodAutoscaler: can it read metrics and scale its target?

use serde_json::Value;

use super::field::text;
use super::{Health, Subject};
use crate::conditions::ConditionStatus;

/// autoscaling/v1 keeps the conditions in this annotation, as JSON.
const V1_CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";

/// A condition that failed to get the scale or a metric (`Failed*`
/// reasons) → Degraded; not able to scale yet, or no conditions yet →
/// Progressing; otherwise Healthy.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    let conditions = conditions(object);
    if conditions.is_empty() {
        return subject.progressing("waiting for the autoscaler to report conditions");
    }
    let field = |condition: &Value, key: &str| text(condition, &format!("/{key}")).to_string();
    let status = |condition: &Value| ConditionStatus::read(text(condition, "/status"));
    if let Some(failed) = conditions
        .iter()
        .find(|c| status(c) == ConditionStatus::False && field(c, "reason").starts_with("Failed"))
    {
        return subject.degraded(format!(
            "{}: {}",
            field(failed, "reason"),
            field(failed, "message")
        ));
    }
    let able = conditions
        .iter()
        .find(|c| field(c, "type") == "AbleToScale");
    match able {
        Some(able) if status(able) == ConditionStatus::True => {}
        Some(able) => {
            return subject
                .progressing(format!("not able to scale yet: {}", field(able, "reason")));
        }
        None => return subject.progressing("waiting for the AbleToScale condition"),
    }
    let current = object
        .pointer("/status/currentReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let desired = object
        .pointer("/status/desiredReplicas")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    subject.healthy(format!("{current} replicas, {desired} desired"))
}

/// The conditions from `status.conditions` (v2) or the v1 annotation.
fn conditions(object: &Value) -> Vec<Value> {
    if let Some(conditions) = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
    {
        return conditions.clone();
    }
    object
        .pointer("/metadata/annotations")
        .and_then(|annotations| annotations.get(V1_CONDITIONS))
        .and_then(Value::as_str)
        .and_then(|json| serde_json::from_str::<Vec<Value>>(json).ok())
        .unwrap_or_default()
}
