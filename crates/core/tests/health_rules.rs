//! Custom health rules: loading, precedence and failure behaviour.

use serde_json::{Value, json};
use tether_core::health::{HealthStatus, RuleError, RuleSet};

fn certificate(ready: &str) -> Value {
    json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "web-tls"},
        "status": {"conditions": [{"type": "Ready", "status": ready, "message": "issued"}]}})
}

#[test]
fn every_shipped_rule_compiles() {
    assert!(RuleSet::shipped().len() >= 48);
}

#[test]
fn a_rule_that_does_not_compile_is_reported_at_load_time_naming_the_rule() {
    let error = RuleSet::from_yaml(
        "team-rules.yaml",
        "rules:\n- group: example.com\n  kinds: [Widget]\n  healthy: \"self.status.ready ==\"\n",
    )
    .unwrap_err();
    assert!(matches!(
        error,
        RuleError::Compile {
            field: "healthy",
            ..
        }
    ));
    assert!(
        error
            .to_string()
            .starts_with("team-rules.yaml: rule example.com/Widget: `healthy` does not compile"),
        "{error}"
    );
}

#[test]
fn a_rule_without_any_status_expression_is_rejected() {
    let error = RuleSet::from_yaml("r.yaml", "rules:\n- group: a\n  kinds: [B]\n").unwrap_err();
    assert!(
        error.to_string().contains("no status expression"),
        "{error}"
    );
}

#[test]
fn a_rule_that_fails_at_run_time_gives_unknown_with_the_error() {
    let rules = RuleSet::from_yaml(
        "r.yaml",
        "rules:\n- group: cert-manager.io\n  kinds: [Certificate]\n  healthy: \"self.spec.missing == 1\"\n",
    )
    .unwrap();
    let health = rules.assess(&certificate("True")).unwrap();
    assert_eq!(health.status, HealthStatus::Unknown);
    assert!(
        health.message.starts_with("Certificate web-tls: health rule r.yaml: cert-manager.io/Certificate failed in `healthy`"),
        "{}",
        health.message
    );
}

#[test]
fn a_user_rule_overrides_the_shipped_rule_for_its_kind() {
    let user = RuleSet::from_yaml(
        "r.yaml",
        "rules:\n- group: cert-manager.io\n  kinds: [Certificate]\n  suspended: \"true\"\n  message: \"'managed elsewhere'\"\n",
    )
    .unwrap();
    let rules = user.over(RuleSet::shipped());
    let health = rules.assess(&certificate("False")).unwrap();
    assert_eq!(health.status, HealthStatus::Suspended);
    assert_eq!(health.message, "Certificate web-tls: managed elsewhere");
    let shipped = RuleSet::shipped().assess(&certificate("False")).unwrap();
    assert_eq!(shipped.status, HealthStatus::Degraded);
}

#[test]
fn a_shipped_rule_overrides_the_built_in_check_and_built_ins_apply_otherwise() {
    let rules = RuleSet::shipped();
    let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"}, "status": {"phase": "Lost"}});
    assert_eq!(rules.assess(&pvc).unwrap().status, HealthStatus::Degraded);
    assert_eq!(
        rules.assess(&certificate("True")).unwrap().message,
        "Certificate web-tls: issued"
    );
}

#[test]
fn an_exact_rule_beats_a_wildcard_rule_in_the_same_layer() {
    let rules = RuleSet::shipped();
    let provider = json!({"apiVersion": "pkg.crossplane.io/v1", "kind": "Provider",
        "metadata": {"name": "p"}});
    assert_eq!(
        rules
            .rule_for("pkg.crossplane.io", "Provider")
            .unwrap()
            .name,
        "shipped/crossplane.yaml: pkg.crossplane.io/Provider,Configuration,Function"
    );
    assert_eq!(
        rules.assess(&provider).unwrap().status,
        HealthStatus::Progressing
    );
}
