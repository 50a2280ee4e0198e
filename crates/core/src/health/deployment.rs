//! Deployment: paused, observed, past its deadline, or rolled out.

use serde_json::Value;

use super::field::{describe, flag, generation_not_observed, int, int_or_zero};
use super::{Health, Subject};
use crate::conditions::{ConditionStatus, find_condition};

/// Paused → Suspended; past its progress deadline → Degraded; a rollout
/// that is not complete or a Deployment that is not available →
/// Progressing; otherwise Healthy.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    if flag(object, "/spec/paused") {
        return subject.suspended("rollout paused");
    }
    if int(object, "/status/observedGeneration").is_none() || generation_not_observed(object) {
        return subject.progressing("waiting for the controller to observe the latest spec");
    }
    let desired = int(object, "/spec/replicas").unwrap_or(1);
    let updated = int_or_zero(object, "/status/updatedReplicas");
    let total = int_or_zero(object, "/status/replicas");
    let available = int_or_zero(object, "/status/availableReplicas");
    let progressing = find_condition(object, "Progressing");
    if let Some(condition) = &progressing
        && condition.reason == "ProgressDeadlineExceeded"
    {
        // The reason pods do not start (CrashLoopBackOff, ImagePullBackOff)
        // is on the Pods, not here; the counts say how far the rollout got.
        return subject.degraded(format!(
            "rollout exceeded its progress deadline ({updated}/{desired} replicas updated, \
             {available} available): {}",
            condition.message
        ));
    }
    if updated < desired {
        return subject.progressing(format!(
            "{updated}/{desired} replicas updated, rollout in progress"
        ));
    }
    if total > updated {
        return subject.progressing(format!(
            "{} old replicas pending termination, rollout in progress",
            total - updated
        ));
    }
    if available < updated {
        return subject.progressing(format!(
            "{available}/{desired} replicas available, rollout in progress"
        ));
    }
    if let Some(condition) = find_condition(object, "Available")
        && condition.status == ConditionStatus::False
    {
        return subject.progressing(format!("not available: {}", describe(&condition)));
    }
    if let Some(condition) = &progressing
        && condition.status == ConditionStatus::False
    {
        return subject.progressing(format!("not progressing: {}", describe(condition)));
    }
    subject.healthy(format!("{available}/{desired} replicas available"))
}
