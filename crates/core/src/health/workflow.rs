//! Argo Workflow: its phase, with the workflow's own message.

use serde_json::Value;

use super::field::{Phase, text};
use super::{Health, HealthStatus, Subject};

/// Succeeded → Healthy; Failed or Error → Degraded; Pending, Running or
/// not started → Progressing. The message is the workflow's own.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    let status = match text(object, "/status/phase").parse() {
        Ok(Phase::Succeeded) => HealthStatus::Healthy,
        Ok(Phase::Failed | Phase::Error) => HealthStatus::Degraded,
        _ => HealthStatus::Progressing,
    };
    subject.health(status, text(object, "/status/message"))
}
