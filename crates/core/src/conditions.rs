//! Reading `status.conditions`, the Kubernetes convention for reporting state.

use serde_json::Value;

crate::vocabulary! {
    /// What a condition says of its type, in the Kubernetes API conventions.
    pub enum ConditionStatus("condition status") {
        True,
        False,
        /// The controller cannot tell yet.
        Unknown,
    }
}

impl ConditionStatus {
    /// The status `text` states. The conventions allow three words;
    /// anything else (a missing field, another word) says neither true nor
    /// false, so it reads as `Unknown`.
    pub fn read(text: &str) -> Self {
        text.parse().unwrap_or(Self::Unknown)
    }

    /// `True` when `holds`, `False` otherwise.
    pub fn from_bool(holds: bool) -> Self {
        if holds { Self::True } else { Self::False }
    }
}

/// A condition as found in `status.conditions[]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition<'a> {
    pub type_: &'a str,
    pub status: ConditionStatus,
    pub reason: &'a str,
    pub message: &'a str,
}

/// The condition of `type_` in `object`'s status, if present.
pub fn find_condition<'a>(object: &'a Value, type_: &str) -> Option<Condition<'a>> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .filter_map(|condition| {
            let text = |field: &str| condition.get(field).and_then(Value::as_str).unwrap_or("");
            Some(Condition {
                type_: condition.get("type")?.as_str()?,
                status: ConditionStatus::read(text("status")),
                reason: text("reason"),
                message: text("message"),
            })
        })
        .find(|condition| condition.type_ == type_)
}

/// Whether `object` has condition `type_` with status `True`.
pub fn condition_is_true(object: &Value, type_: &str) -> bool {
    find_condition(object, type_).is_some_and(|condition| condition.status == ConditionStatus::True)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_established_crd_has_a_true_established_condition() {
        let crd = json!({"status": {"conditions": [
            {"type": "NamesAccepted", "status": "True"},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}]}});
        assert!(condition_is_true(&crd, "Established"));
        assert_eq!(
            find_condition(&crd, "Established").unwrap().reason,
            "InitialNamesAccepted"
        );
    }

    #[test]
    fn a_status_outside_the_conventions_reads_as_unknown() {
        let odd = json!({"status": {"conditions": [{"type": "Ready", "status": "true"},
            {"type": "Synced"}]}});
        for type_ in ["Ready", "Synced"] {
            let condition = find_condition(&odd, type_).unwrap();
            assert_eq!(condition.status, ConditionStatus::Unknown, "{type_}");
        }
        assert_eq!(ConditionStatus::from_bool(true), ConditionStatus::True);
    }

    #[test]
    fn a_missing_or_false_condition_is_not_true() {
        let pending =
            json!({"status": {"conditions": [{"type": "Established", "status": "False"}]}});
        assert!(!condition_is_true(&pending, "Established"));
        assert!(!condition_is_true(&json!({}), "Established"));
    }
}
