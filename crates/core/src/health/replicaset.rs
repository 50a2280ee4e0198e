//! ReplicaSet: observed, labelled, ready and available.

use serde_json::Value;

use super::field::{describe, generation_not_observed, int, int_or_zero};
use super::{Health, Subject};
use crate::conditions::{ConditionStatus, find_condition};

/// Not observed, failing to create pods (`ReplicaFailure`), or fewer
/// ready/available pods than desired → Progressing; otherwise Healthy.
///
/// `ReplicaFailure` (quota, admission denial) is retried by the controller,
/// so it is reported as Progressing with its reason; the owning Deployment
/// turns Degraded once its progress deadline passes.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    if int(object, "/status/observedGeneration").is_none() || generation_not_observed(object) {
        return subject.progressing("waiting for the controller to observe the latest spec");
    }
    if let Some(condition) = find_condition(object, "ReplicaFailure")
        && condition.status == ConditionStatus::True
    {
        return subject.progressing(format!("failing to create pods: {}", describe(&condition)));
    }
    let desired = int(object, "/spec/replicas").unwrap_or(1);
    let labelled = int_or_zero(object, "/status/fullyLabeledReplicas");
    let ready = int_or_zero(object, "/status/readyReplicas");
    let available = int_or_zero(object, "/status/availableReplicas");
    if labelled < desired {
        return subject.progressing(format!("{labelled}/{desired} pods created"));
    }
    if ready < desired {
        return subject.progressing(format!("{ready}/{desired} pods ready"));
    }
    if available < desired {
        return subject.progressing(format!("{available}/{desired} pods available"));
    }
    subject.healthy(format!("{available}/{desired} pods available"))
}
