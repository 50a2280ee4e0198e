//! The generic inference, for kinds without a check or rule of their own:
//! it reads what operators put in status — conditions of any type, phase
//! and state words, flags, error fields, replica counts, observed
//! generations — and the spec's `paused` / `suspend`, turns each into a
//! [`Signal`] that names its field, and lets the heaviest decide (see
//! [`Weight`] for the order).
//!
//! An object without a status has no health (as in Argo CD, it counts as
//! Healthy in its application). A custom resource whose status says
//! nothing Tether can read is `Unknown`, with the fields it looked at, so
//! that a green light is never given without a reason.

mod conditions;
mod fields;
mod memo;
mod signal;
mod words;

use serde_json::Value;

use super::{Health, HealthStatus, Subject};
pub use signal::{Signal, Weight};

/// The verdict and every signal that was weighed, heaviest first.
#[derive(Debug, Clone)]
pub struct Inference {
    pub health: Health,
    pub signals: Vec<Signal>,
}

/// The generic verdict on `object`; `None` when it has no status (and is
/// not paused), or is a built-in Kubernetes kind whose status says
/// nothing.
pub(super) fn assess(object: &Value) -> Option<Health> {
    infer(object).map(|inference| inference.health)
}

/// [`assess`] with the signals behind the verdict.
pub fn infer(object: &Value) -> Option<Inference> {
    let subject = Subject::of(object);
    let facts = fields::Object::of(object, subject.kind);
    let mut signals = Vec::new();
    fields::paused(object, &mut signals);
    let status = object.get("status").filter(|status| !is_blank(status));
    match status {
        Some(Value::Object(map)) => {
            fields::status(map, &facts, &mut signals);
            fields::generation(object, facts.generation, &mut signals);
            fields::replicas(object, &mut signals);
        }
        Some(Value::String(word)) => {
            if let Some(meaning) = words::meaning(word) {
                signals.push(Signal::new(Weight::of(meaning), format!("status = {word}")));
            }
        }
        _ => {}
    }
    signals.sort_by_key(|signal| signal.weight);
    let health = match signals.first() {
        Some(decisive) => subject.health(decisive.weight.status(), decisive.text()),
        None if status.is_none() || is_kubernetes_group(subject.group) => return None,
        None => subject.health(HealthStatus::Unknown, unread(status)),
    };
    Some(Inference { health, signals })
}

/// The message for a status Tether cannot read: which fields it has.
fn unread(status: Option<&Value>) -> String {
    let fields: Vec<String> = status
        .and_then(Value::as_object)
        .map(|map| map.keys().map(|key| format!("status.{key}")).collect())
        .unwrap_or_default();
    format!(
        "no health in {} (no condition, phase or state Tether can read); a health rule can say",
        fields.join(", ")
    )
}

/// `null`, `{}`: no status at all.
fn is_blank(status: &Value) -> bool {
    status.is_null() || status.as_object().is_some_and(|map| map.is_empty())
}

/// The core group and `*.k8s.io` groups: Kubernetes' own kinds, whose
/// statuses (a ResourceQuota's usage, a Node's addresses) are no health.
fn is_kubernetes_group(group: &str) -> bool {
    group.is_empty() || group.ends_with(".k8s.io") || !group.contains('.')
}
