//! DaemonSet: observed, scheduled, updated and available on every node.

use serde_json::Value;

use super::field::{generation_not_observed, int, int_or_zero, text};
use super::{Health, Subject};

/// Not observed, not updated (unless updates are `OnDelete`), or fewer
/// ready/available pods than nodes that should run one → Progressing;
/// otherwise Healthy.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    if int(object, "/status/observedGeneration").is_none() || generation_not_observed(object) {
        return subject.progressing("waiting for the controller to observe the latest spec");
    }
    let Some(desired) = int(object, "/status/desiredNumberScheduled") else {
        return subject.progressing("waiting for the controller to schedule pods");
    };
    let updated = int_or_zero(object, "/status/updatedNumberScheduled");
    if text(object, "/spec/updateStrategy/type") != "OnDelete" && updated < desired {
        return subject.progressing(format!(
            "{updated}/{desired} pods updated, rollout in progress"
        ));
    }
    let ready = int_or_zero(object, "/status/numberReady");
    if ready < desired {
        return subject.progressing(format!("{ready}/{desired} pods ready"));
    }
    let available = int_or_zero(object, "/status/numberAvailable");
    if available < desired {
        return subject.progressing(format!("{available}/{desired} pods available"));
    }
    subject.healthy(format!("{available}/{desired} pods available"))
}
