//! Pod: phase, container errors, restart policy and readiness.

use serde_json::Value;

use super::field::{Phase, text};
use super::{Health, Subject};
use crate::conditions::{ConditionStatus, find_condition};

/// Annotation that asks for a run-to-completion pod to be judged like a
/// long-running one (Argo CD's spelling, kept so existing manifests work).
const IGNORE_RESTART_POLICY: &str = "argocd.argoproj.io/ignore-restart-policy";
/// Annotation that marks a sync hook pod.
const HOOK: &str = "argocd.argoproj.io/hook";
/// How long a pod may stay unschedulable before it counts as Degraded:
/// long enough for a cluster autoscaler to add a node.
pub(super) const UNSCHEDULABLE_GRACE_SECONDS: i64 = 300;

/// Succeeded → Healthy; Failed → Degraded; a container stuck in an error
/// state (CrashLoopBackOff, ImagePullBackOff, ErrImagePull, …) or exited
/// with an error in a long-running pod → Degraded; unschedulable past the
/// grace period → Degraded; running and ready (long-running pods) →
/// Healthy; anything else → Progressing.
///
/// Pods that run to completion (`restartPolicy` Never or OnFailure) are
/// not judged on container errors while they run: they are often sync
/// hooks, and failing a hook early would be wrong; their phase decides.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    let phase = text(object, "/status/phase");
    let long_running = is_long_running(object);
    if long_running && let Some(problem) = container_problem(object) {
        return subject.degraded(problem);
    }
    match phase.parse() {
        Ok(Phase::Succeeded) => subject.healthy("completed"),
        Ok(Phase::Failed) => subject.degraded(failure(object)),
        Ok(Phase::Running) if long_running => match find_condition(object, "Ready") {
            Some(ready) if ready.status == ConditionStatus::True => {
                subject.healthy("running and ready")
            }
            Some(ready) if !ready.message.is_empty() => {
                subject.progressing(format!("running, not ready: {}", ready.message))
            }
            _ => subject.progressing("running, not ready"),
        },
        Ok(Phase::Running) => subject.progressing("running to completion"),
        Ok(Phase::Pending) => pending(object, subject),
        _ if phase.is_empty() => subject.progressing("waiting for the kubelet to report status"),
        _ => subject.progressing(format!("phase {phase}")),
    }
}

fn is_long_running(object: &Value) -> bool {
    let policy = text(object, "/spec/restartPolicy");
    if policy.is_empty() || policy == "Always" {
        return true;
    }
    let annotations = object.pointer("/metadata/annotations");
    let annotation = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
    annotation(IGNORE_RESTART_POLICY) == Some("true") && annotation(HOOK).is_none()
}

/// The first container stuck in an error state or exited with an error.
fn container_problem(object: &Value) -> Option<String> {
    containers(object).find_map(|container| {
        let name = text(container, "/name");
        let restarts = container
            .get("restartCount")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let waiting = text(container, "/state/waiting/reason");
        if is_error_reason(waiting) {
            let detail = match text(container, "/state/waiting/message") {
                "" => String::new(),
                message => format!(": {message}"),
            };
            return Some(format!(
                "container {name} in {waiting} (restarts {restarts}){detail}"
            ));
        }
        let (code, reason) = exited_with_error(container)?;
        Some(format!(
            "container {name} exited with code {code} ({reason}, restarts {restarts})"
        ))
    })
}

/// The exit code and reason of a container that terminated with an error.
fn exited_with_error(container: &Value) -> Option<(i64, &str)> {
    let terminated = container.pointer("/state/terminated")?;
    let code = terminated.get("exitCode").and_then(Value::as_i64)?;
    (code != 0).then(|| (code, text(terminated, "/reason")))
}

/// Waiting reasons that mean the container cannot start without help:
/// `Err*` (ErrImagePull), `*Error` (CreateContainerConfigError) and
/// `*BackOff` (CrashLoopBackOff, ImagePullBackOff).
fn is_error_reason(reason: &str) -> bool {
    reason.starts_with("Err")
        || reason.ends_with("Error")
        || reason.ends_with("BackOff")
        || reason == "InvalidImageName"
}

fn containers(object: &Value) -> impl Iterator<Item = &Value> {
    ["/status/initContainerStatuses", "/status/containerStatuses"]
        .into_iter()
        .filter_map(|pointer| object.pointer(pointer).and_then(Value::as_array))
        .flatten()
}

fn failure(object: &Value) -> String {
    let message = text(object, "/status/message");
    if !message.is_empty() {
        return format!("failed: {message}");
    }
    containers(object)
        .find_map(|container| {
            let (code, reason) = exited_with_error(container)?;
            let name = text(container, "/name");
            Some(format!(
                "failed: container {name} exited with code {code} ({reason})"
            ))
        })
        .unwrap_or_else(|| "failed".to_string())
}

fn pending(object: &Value, subject: &Subject) -> Health {
    if let Some(scheduled) = find_condition(object, "PodScheduled")
        && scheduled.status == ConditionStatus::False
        && scheduled.reason == "Unschedulable"
    {
        let detail = if scheduled.message.is_empty() {
            "unschedulable".to_string()
        } else {
            format!("unschedulable: {}", scheduled.message)
        };
        let age = subject.age_seconds(object);
        return if age.is_none_or(|age| age > UNSCHEDULABLE_GRACE_SECONDS) {
            subject.degraded(detail)
        } else {
            subject.progressing(detail)
        };
    }
    let waiting = containers(object)
        .map(|container| text(container, "/state/waiting/reason"))
        .find(|reason| !reason.is_empty());
    match (find_condition(object, "Ready"), waiting) {
        (_, Some(reason)) => subject.progressing(format!("pending: {reason}")),
        (Some(ready), None) if !ready.message.is_empty() => {
            subject.progressing(format!("pending: {}", ready.message))
        }
        _ => subject.progressing("pending"),
    }
}
