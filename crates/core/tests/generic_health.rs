//! The generic inference on kinds Tether has no rule for, one fixture a
//! behaviour (`tests/fixtures/health/generic/cases.yaml`), judged as a
//! brand-new CRD is: built-in checks and the generic inference only.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use tether_core::health::RuleSet;

#[derive(Deserialize)]
struct Cases {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    file: String,
    status: String,
    message_contains: String,
}

#[test]
fn every_generic_fixture_gets_its_status_and_a_message_that_names_the_field() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/health/generic");
    let text = std::fs::read_to_string(folder.join("cases.yaml")).unwrap();
    let cases: Cases = serde_saphyr::from_str(&text).unwrap();
    let rules = RuleSet::default();
    let mut wrong = Vec::new();
    for case in &cases.cases {
        let text = std::fs::read_to_string(folder.join(&case.file)).unwrap();
        let object: Value = serde_saphyr::from_str(&text).unwrap();
        let health = rules.assess(&object);
        let right = health.as_ref().is_some_and(|health| {
            health.status.as_str() == case.status && health.message.contains(&case.message_contains)
        });
        if !right {
            wrong.push(format!(
                "  {}: expected {} ({:?}), got {health:?}",
                case.file, case.status, case.message_contains
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn an_object_without_a_status_has_no_health_and_a_builtin_kind_that_says_nothing_neither() {
    let rules = RuleSet::default();
    let bare: Value = serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w"}, "spec": {"size": 1}});
    assert_eq!(rules.assess(&bare), None);
    let quota: Value = serde_json::json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "q"}, "status": {"hard": {"pods": "10"}, "used": {"pods": "2"}}});
    assert_eq!(rules.assess(&quota), None);
}
