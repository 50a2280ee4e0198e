//! Argo Workflow: its phase, with the workflow's own message.

use serde_json::Value;

use super::field::text;
use super::{Health, HealthStatus, Subject};

/// Succeeded → Healthy; Failed or Error → Degraded; Pending, Running or
/// not started → Progressing. The message is the workflow's own.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    let status = match text(object, "/status/phase").parse() {
        Ok(WorkflowPhase::Succeeded) => HealthStatus::Healthy,
        Ok(WorkflowPhase::Failed | WorkflowPhase::Error) => HealthStatus::Degraded,
        _ => HealthStatus::Progressing,
    };
    subject.health(status, text(object, "/status/message"))
}

crate::vocabulary! {
    /// An Argo Workflow's `status.phase`.
    enum WorkflowPhase("workflow phase") {
        Pending = "Pending",
        Running = "Running",
        Succeeded = "Succeeded",
        Failed = "Failed",
        Error = "Error",
    }
}
