//! StatefulSet: observed, ready, and rolled out (partitioned and OnDelete
//! updates included).

use serde_json::Value;

use super::field::{generation_not_observed, int, int_or_zero, text};
use super::{Health, Subject};

/// Not observed, fewer ready or current pods than desired, extra pods, or
/// an unfinished rolling update → Progressing; otherwise Healthy.
///
/// With `OnDelete` updates pods are replaced only when someone deletes
/// them, so a revision mismatch is not a rollout in progress; with a
/// partition only the pods at or above the partition are expected to be
/// updated.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    if int(object, "/status/observedGeneration").is_none() || generation_not_observed(object) {
        return subject.progressing("waiting for the controller to observe the latest spec");
    }
    let desired = int(object, "/spec/replicas").unwrap_or(1);
    let replicas = int_or_zero(object, "/status/replicas");
    let ready = int_or_zero(object, "/status/readyReplicas");
    if replicas > desired {
        return subject.progressing(format!(
            "{} extra pods pending termination",
            replicas - desired
        ));
    }
    if ready < desired {
        return subject.progressing(format!("{ready}/{desired} pods ready"));
    }
    let on_delete = text(object, "/spec/updateStrategy/type") == "OnDelete";
    if on_delete {
        return subject.healthy(format!("{ready}/{desired} pods ready (OnDelete updates)"));
    }
    let partition = int_or_zero(object, "/spec/updateStrategy/rollingUpdate/partition");
    if partition > 0 {
        let updated = int_or_zero(object, "/status/updatedReplicas");
        let expected = (desired - partition).max(0);
        if updated < expected {
            return subject.progressing(format!(
                "{updated}/{expected} pods updated above partition {partition}"
            ));
        }
        return subject.healthy(format!(
            "{ready}/{desired} pods ready, partitioned rollout complete"
        ));
    }
    let current = int(object, "/status/currentReplicas");
    if current.is_some_and(|current| current < desired) {
        return subject.progressing(format!(
            "{}/{desired} pods at the current revision, rolling update in progress",
            current.unwrap_or(0)
        ));
    }
    let update_revision = text(object, "/status/updateRevision");
    if !update_revision.is_empty() && update_revision != text(object, "/status/currentRevision") {
        return subject.progressing("rolling update in progress");
    }
    subject.healthy(format!("{ready}/{desired} pods ready"))
}
