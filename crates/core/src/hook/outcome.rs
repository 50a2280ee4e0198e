//! Whether a live hook has finished, and how: a Job by its `Complete` /
//! `Failed` condition (and the `SuccessCriteriaMet` / `FailureTarget`
//! conditions the Job controller sets just before them), a Pod by its
//! phase; any other kind is done once the API server created it.

use serde_json::Value;

crate::vocabulary! {
    /// Where one hook stands.
    pub enum HookOutcome("hook outcome") {
        /// Created and not finished yet.
        Running,
        Succeeded,
        Failed,
    }
}

/// The outcome of the live hook `live`, with a message saying why when it
/// is not Succeeded (`Job shop/migrate: BackoffLimitExceeded: …` is built
/// by the caller, which knows the object's name).
pub fn judge(live: &Value) -> (HookOutcome, String) {
    match live.get("kind").and_then(Value::as_str) {
        Some("Job") => job(live),
        Some("Pod") => pod(live),
        _ => (HookOutcome::Succeeded, String::new()),
    }
}

fn job(live: &Value) -> (HookOutcome, String) {
    let conditions = live
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let holds = |kind: &str| {
        conditions.iter().find(|c| {
            c.get("type").and_then(Value::as_str) == Some(kind)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
    };
    let said = |condition: &Value| {
        let text = |key| condition.get(key).and_then(Value::as_str).unwrap_or("");
        match (text("reason"), text("message")) {
            ("", "") => "failed".to_string(),
            (reason, "") => reason.to_string(),
            ("", message) => message.to_string(),
            (reason, message) => format!("{reason}: {message}"),
        }
    };
    if let Some(failed) = holds("Failed").or_else(|| holds("FailureTarget")) {
        return (HookOutcome::Failed, said(failed));
    }
    if holds("Complete")
        .or_else(|| holds("SuccessCriteriaMet"))
        .is_some()
    {
        return (HookOutcome::Succeeded, String::new());
    }
    let active = live
        .pointer("/status/active")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    (
        HookOutcome::Running,
        format!("{active} pod(s) active, not complete yet"),
    )
}

fn pod(live: &Value) -> (HookOutcome, String) {
    let phase = live
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    match phase {
        "Succeeded" => (HookOutcome::Succeeded, String::new()),
        "Failed" => {
            let reason = live
                .pointer("/status/containerStatuses/0/state/terminated/reason")
                .and_then(Value::as_str)
                .unwrap_or("Failed");
            let code = live
                .pointer("/status/containerStatuses/0/state/terminated/exitCode")
                .and_then(Value::as_i64);
            let message = match code {
                Some(code) => format!("pod failed: {reason} (exit code {code})"),
                None => format!("pod failed: {reason}"),
            };
            (HookOutcome::Failed, message)
        }
        other => (HookOutcome::Running, format!("pod {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job_with(conditions: Value) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
            "status": {"active": 1, "conditions": conditions}})
    }

    #[test]
    fn a_job_succeeds_with_its_complete_condition_and_fails_with_its_reason() {
        let complete = job_with(json!([{"type": "Complete", "status": "True"}]));
        assert_eq!(judge(&complete).0, HookOutcome::Succeeded);
        let failed = job_with(json!([{"type": "Failed", "status": "True",
            "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]));
        assert_eq!(
            judge(&failed),
            (
                HookOutcome::Failed,
                "BackoffLimitExceeded: Job has reached the specified backoff limit".into()
            )
        );
        let running = job_with(json!([]));
        assert_eq!(judge(&running).0, HookOutcome::Running);
    }

    #[test]
    fn a_pod_finishes_with_its_phase_and_other_kinds_once_created() {
        let pod = |phase: &str| json!({"kind": "Pod", "status": {"phase": phase}});
        assert_eq!(judge(&pod("Succeeded")).0, HookOutcome::Succeeded);
        assert_eq!(judge(&pod("Failed")).0, HookOutcome::Failed);
        assert_eq!(judge(&pod("Running")).0, HookOutcome::Running);
        assert_eq!(
            judge(&json!({"kind": "ConfigMap"})).0,
            HookOutcome::Succeeded
        );
    }
}
