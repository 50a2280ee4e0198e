//! PersistentVolumeClaim: Bound, Pending or Lost.

use serde_json::Value;

use super::field::text;
use super::{Health, Subject};

/// Bound → Healthy; Lost → Degraded; Pending (or not yet reported) →
/// Progressing.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    match text(object, "/status/phase") {
        "Bound" => subject.healthy("bound"),
        "Lost" => subject.degraded("lost its volume"),
        "Pending" | "" => subject.progressing("waiting to be bound"),
        other => subject.progressing(format!("phase {other}")),
    }
}
