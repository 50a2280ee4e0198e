//! Which Applications a route is about: a Kubernetes label selector over
//! the Application's labels (`matchLabels`, `matchExpressions`, with the
//! API server's meaning), and optionally a list of namespaces.

use std::collections::BTreeMap;

use serde::Deserialize;

tether_core::vocabulary! {
    /// The operators of a `matchExpressions` requirement, as Kubernetes
    /// spells them.
    pub enum Operator("label selector operator") {
        In,
        NotIn,
        Exists,
        DoesNotExist,
    }
}

/// One `matchExpressions` requirement.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    #[serde(default)]
    pub values: Vec<String>,
}

/// The Applications a route is about; empty selects every Application.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppSelector {
    /// The Application's namespace is one of these (empty: any).
    #[serde(default)]
    pub namespaces: Vec<String>,
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub match_expressions: Vec<Requirement>,
}

impl AppSelector {
    /// Whether the Application in `namespace` with `labels` is selected:
    /// every part must hold, as in a Kubernetes label selector.
    ///
    /// ```
    /// use tether_controller::notify::selector::AppSelector;
    /// let selector: AppSelector = serde_json::from_value(serde_json::json!({
    ///     "namespaces": ["shop"],
    ///     "matchLabels": {"team": "payments"},
    ///     "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["dev"]}]
    /// })).unwrap();
    /// let labels = [("team".to_string(), "payments".to_string())].into();
    /// assert!(selector.matches("shop", &labels));
    /// assert!(!selector.matches("blog", &labels));
    /// ```
    pub fn matches(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        (self.namespaces.is_empty() || self.namespaces.iter().any(|ns| ns == namespace))
            && self
                .match_labels
                .iter()
                .all(|(key, value)| labels.get(key) == Some(value))
            && self
                .match_expressions
                .iter()
                .all(|requirement| requirement.matches(labels))
    }

    /// Why the selector is not valid, if it is not: `In` and `NotIn` need
    /// values, `Exists` and `DoesNotExist` take none (as the API server says).
    pub fn problem(&self) -> Option<SelectorProblem> {
        self.match_expressions.iter().find_map(|requirement| {
            let wants_values = matches!(requirement.operator, Operator::In | Operator::NotIn);
            let (key, operator) = (requirement.key.clone(), requirement.operator);
            match (wants_values, requirement.values.is_empty()) {
                (true, true) => Some(SelectorProblem::NeedsValues { key, operator }),
                (false, false) => Some(SelectorProblem::TakesNoValues { key, operator }),
                _ => None,
            }
        })
    }
}

/// A `matchExpressions` requirement whose values do not fit its operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorProblem {
    #[error("selector key {key:?}: operator {operator} needs values")]
    NeedsValues { key: String, operator: Operator },
    #[error("selector key {key:?}: operator {operator} takes no values")]
    TakesNoValues { key: String, operator: Operator },
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|value| self.values.contains(value)),
            Operator::NotIn => value.is_none_or(|value| !self.values.contains(value)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn selector(value: serde_json::Value) -> AppSelector {
        serde_json::from_value(value).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn an_empty_selector_selects_every_application() {
        assert!(AppSelector::default().matches("any", &labels(&[])));
    }

    #[test]
    fn each_operator_means_what_it_means_in_kubernetes() {
        let cases = [
            (
                "In",
                json!(["prod", "staging"]),
                &[("tier", "prod")][..],
                true,
            ),
            ("In", json!(["prod"]), &[("tier", "dev")][..], false),
            ("In", json!(["prod"]), &[][..], false),
            ("NotIn", json!(["dev"]), &[("tier", "prod")][..], true),
            ("NotIn", json!(["dev"]), &[][..], true),
            ("NotIn", json!(["dev"]), &[("tier", "dev")][..], false),
            ("Exists", json!([]), &[("tier", "x")][..], true),
            ("Exists", json!([]), &[][..], false),
            ("DoesNotExist", json!([]), &[][..], true),
            ("DoesNotExist", json!([]), &[("tier", "x")][..], false),
        ];
        for (operator, values, app_labels, expected) in cases {
            let selector = selector(json!({"matchExpressions": [
                {"key": "tier", "operator": operator, "values": values}]}));
            assert_eq!(
                selector.matches("shop", &labels(app_labels)),
                expected,
                "{operator} {values} over {app_labels:?}"
            );
        }
    }

    #[test]
    fn labels_expressions_and_namespaces_must_all_hold() {
        let selector = selector(json!({
            "namespaces": ["shop", "blog"],
            "matchLabels": {"team": "payments"},
            "matchExpressions": [{"key": "tier", "operator": "Exists"}]}));
        let good = labels(&[("team", "payments"), ("tier", "prod")]);
        assert!(selector.matches("shop", &good));
        assert!(selector.matches("blog", &good));
        assert!(!selector.matches("other", &good));
        assert!(!selector.matches("shop", &labels(&[("team", "payments")])));
        assert!(!selector.matches("shop", &labels(&[("team", "search"), ("tier", "prod")])));
    }

    #[test]
    fn an_operator_without_its_values_or_with_values_it_takes_not_is_a_problem() {
        let missing = selector(json!({"matchExpressions": [{"key": "tier", "operator": "In"}]}));
        assert_eq!(
            missing.problem().unwrap().to_string(),
            "selector key \"tier\": operator In needs values"
        );
        let extra = selector(json!({"matchExpressions": [
            {"key": "tier", "operator": "Exists", "values": ["x"]}]}));
        assert_eq!(
            extra.problem().unwrap().to_string(),
            "selector key \"tier\": operator Exists takes no values"
        );
        let unknown = serde_json::from_value::<AppSelector>(json!({"matchExpressions": [
            {"key": "tier", "operator": "Like", "values": ["x"]}]}));
        assert!(
            unknown
                .unwrap_err()
                .to_string()
                .contains("not a label selector operator")
        );
    }
}
