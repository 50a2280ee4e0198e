//! Health: is what we applied actually working?
//!
//! [`assess`] decides the health of one live object from its manifest alone
//! (built-in checks per kind, then a generic conditions check), [`RuleSet`]
//! adds custom CEL rules on top (user rule > shipped rule > built-in), and
//! [`app_health`] folds the health of an application's resources into one.
//! Every decision is a pure function of the object, so health can be
//! recomputed from watch events without asking the API server anything.

mod apiservice;
mod crd;
mod cronjob;
mod daemonset;
mod deployment;
mod generic;
mod hpa;
mod ingress;
mod job;
mod pod;
mod pvc;
mod replicaset;
pub mod rules;
mod service;
mod statefulset;
mod status;
mod workflow;

use serde_json::Value;

pub use rules::{RuleError, RuleSet};
pub use status::{Health, HealthStatus};

/// Assesses `object` with the built-in checks: a kind-specific check if
/// Tether has one, otherwise the generic conditions check.
///
/// Returns `None` when no check applies (for example a ConfigMap, or a
/// custom resource that reports no status): such a resource has no health
/// and does not count towards its application's health, as in Argo CD.
///
/// ```
/// use tether_core::health::{assess, HealthStatus};
/// let pvc = serde_json::json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
///     "metadata": {"name": "data"}, "status": {"phase": "Pending"}});
/// let health = assess(&pvc).unwrap();
/// assert_eq!(health.status, HealthStatus::Progressing);
/// assert_eq!(health.message, "PersistentVolumeClaim data: waiting to be bound");
/// ```
pub fn assess(object: &Value) -> Option<Health> {
    assess_at(object, now())
}

/// [`assess`] at a given time (Unix seconds), for the few checks that
/// depend on an object's age (a pod unschedulable for longer than a grace
/// period is Degraded). Pure: the same inputs give the same health.
pub fn assess_at(object: &Value, now: i64) -> Option<Health> {
    builtin_at(object, now).or_else(|| generic::assess(object))
}

/// Assesses `object` with the kind-specific built-in checks only, without
/// the generic conditions fallback: the same scope as Argo CD's built-in
/// checks, which is what the `builtin/` conformance corpus measures.
pub fn assess_builtin(object: &Value) -> Option<Health> {
    builtin_at(object, now())
}

fn builtin_at(object: &Value, now: i64) -> Option<Health> {
    let subject = Subject::of(object).at(now);
    if is_pending_deletion(object) {
        return Some(subject.progressing("pending deletion"));
    }
    let check = builtin_check(subject.group, subject.kind)?;
    Some(check(object, &subject))
}

/// Folds the health of an application's resources into the application's
/// health: the worst status wins (see [`HealthStatus`] for the order), and
/// the message names how many resources are in that state and the first of
/// them. Resources without health are simply not passed in.
pub fn app_health<'a>(resources: impl IntoIterator<Item = &'a Health>) -> Health {
    let mut total = 0usize;
    let mut worst: Option<&Health> = None;
    let mut worst_count = 0usize;
    for health in resources {
        total += 1;
        match worst {
            Some(current) if health.status < current.status => {}
            Some(current) if health.status == current.status => worst_count += 1,
            _ => {
                worst = Some(health);
                worst_count = 1;
            }
        }
    }
    match worst {
        None => Health::new(HealthStatus::Healthy, "no resources with a health check"),
        Some(health) if health.status == HealthStatus::Healthy => Health::new(
            HealthStatus::Healthy,
            format!("{total} of {total} resources healthy"),
        ),
        Some(health) => Health::new(
            health.status,
            format!(
                "{worst_count} of {total} resources {}; first: {}",
                health.status, health.message
            ),
        ),
    }
}

/// Whether `object` is being deleted (its `deletionTimestamp` is set).
fn is_pending_deletion(object: &Value) -> bool {
    object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|timestamp| !timestamp.is_null())
}

/// The current time in Unix seconds.
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs() as i64)
}

/// A kind-specific check: the object and how to name it.
type Check = fn(&Value, &Subject) -> Health;

/// The built-in check for a group and kind, as a table.
fn builtin_check(group: &str, kind: &str) -> Option<Check> {
    let check: Check = match (group, kind) {
        ("apps" | "extensions", "Deployment") => deployment::assess,
        ("apps", "StatefulSet") => statefulset::assess,
        ("apps" | "extensions", "DaemonSet") => daemonset::assess,
        ("apps" | "extensions", "ReplicaSet") => replicaset::assess,
        ("", "Pod") => pod::assess,
        ("", "PersistentVolumeClaim") => pvc::assess,
        ("", "Service") => service::assess,
        ("batch", "Job") => job::assess,
        ("batch", "CronJob") => cronjob::assess,
        ("networking.k8s.io" | "extensions", "Ingress") => ingress::assess,
        ("autoscaling", "HorizontalPodAutoscaler") => hpa::assess,
        ("apiregistration.k8s.io", "APIService") => apiservice::assess,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd::assess,
        ("argoproj.io", "Workflow") => workflow::assess,
        _ => return None,
    };
    Some(check)
}

/// How messages name an object: `Kind name`, plus its group for lookups.
#[derive(Debug, Clone)]
pub(crate) struct Subject<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
    /// The time of the assessment, in Unix seconds.
    pub now: i64,
}

impl<'a> Subject<'a> {
    /// Reads kind, group and name leniently: health is assessed on live
    /// objects, which are well-formed, and a missing field only blurs the
    /// message.
    pub fn of(object: &'a Value) -> Self {
        let text = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        let api_version = text("/apiVersion");
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        Subject {
            group,
            kind: text("/kind"),
            name: text("/metadata/name"),
            now: 0,
        }
    }

    /// The same subject assessed at `now` (Unix seconds).
    pub fn at(mut self, now: i64) -> Self {
        self.now = now;
        self
    }

    /// How old `object` is, from its `creationTimestamp`; `None` if unknown.
    pub fn age_seconds(&self, object: &Value) -> Option<i64> {
        let created = field::timestamp(field::text(object, "/metadata/creationTimestamp"))?;
        Some(self.now - created)
    }

    /// A health whose message is this subject followed by `detail`.
    pub fn health(&self, status: HealthStatus, detail: impl AsRef<str>) -> Health {
        let detail = detail.as_ref();
        let message = if detail.is_empty() {
            format!("{} {}", self.kind, self.name)
        } else {
            format!("{} {}: {detail}", self.kind, self.name)
        };
        Health::new(status, message)
    }

    /// The part of `message` after this subject's `Kind name: ` prefix.
    pub fn detail<'m>(&self, message: &'m str) -> &'m str {
        let prefix = format!("{} {}", self.kind, self.name);
        match message.strip_prefix(&prefix) {
            Some("") => "",
            Some(rest) => rest.strip_prefix(": ").unwrap_or(message),
            None => message,
        }
    }

    pub fn healthy(&self, detail: impl AsRef<str>) -> Health {
        self.health(HealthStatus::Healthy, detail)
    }

    pub fn progressing(&self, detail: impl AsRef<str>) -> Health {
        self.health(HealthStatus::Progressing, detail)
    }

    pub fn degraded(&self, detail: impl AsRef<str>) -> Health {
        self.health(HealthStatus::Degraded, detail)
    }

    pub fn suspended(&self, detail: impl AsRef<str>) -> Health {
        self.health(HealthStatus::Suspended, detail)
    }
}

/// The part of a health message after the `Kind name: ` prefix that names
/// `object`; conformance runners compare this with peers' messages, which
/// do not name the object.
pub fn message_detail<'m>(object: &Value, message: &'m str) -> &'m str {
    Subject::of(object).detail(message)
}

/// Small readers for the fields checks look at.
pub(crate) mod field {
    use serde_json::Value;

    use crate::conditions::Condition;

    /// An integer field, `None` if absent or not an integer.
    pub fn int(object: &Value, pointer: &str) -> Option<i64> {
        object.pointer(pointer).and_then(Value::as_i64)
    }

    /// An integer field, 0 if absent.
    pub fn int_or_zero(object: &Value, pointer: &str) -> i64 {
        int(object, pointer).unwrap_or(0)
    }

    /// A condition's message, or its reason if it has no message.
    pub fn describe<'a>(condition: &Condition<'a>) -> &'a str {
        if condition.message.is_empty() {
            condition.reason
        } else {
            condition.message
        }
    }

    /// An RFC 3339 timestamp in Unix seconds; `None` if empty or malformed.
    pub fn timestamp(text: &str) -> Option<i64> {
        chrono::DateTime::parse_from_rfc3339(text)
            .ok()
            .map(|time| time.timestamp())
    }

    /// A string field, "" if absent.
    pub fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// A boolean field, false if absent.
    pub fn flag(object: &Value, pointer: &str) -> bool {
        object
            .pointer(pointer)
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    crate::vocabulary! {
        /// A `status.phase` of the kinds judged by it: a Pod's (Pending,
        /// Running, Succeeded, Failed, Unknown) or an Argo Workflow's
        /// (Pending, Running, Succeeded, Failed, Error).
        pub enum Phase("phase") {
            Pending,
            Running,
            Succeeded,
            Failed,
            Error,
            Unknown,
        }
    }

    /// Whether the controller has not yet observed the latest spec.
    pub fn generation_not_observed(object: &Value) -> bool {
        let generation = int(object, "/metadata/generation");
        let observed = int(object, "/status/observedGeneration");
        match (generation, observed) {
            (Some(generation), Some(observed)) => observed < generation,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests;
