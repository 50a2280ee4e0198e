//! Health against fixtures: the shipped rules against fixtures written from
//! each operator's documented status API (one folder per operator under
//! `fixtures/health/`, one object per file, and a `cases.yaml` saying what
//! each object's health is), and the generic inference against its own
//! (`fixtures/health/generic/`, judged without shipped rules, as a
//! brand-new CRD is).

use std::path::{Path, PathBuf};

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
    #[serde(default)]
    message_contains: Option<String>,
}

fn folder(operator: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/health")
        .join(operator)
}

fn read_yaml<T: for<'de> Deserialize<'de>>(path: &Path) -> T {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// Assesses every case of `operator` with the shipped rules and fails
/// listing every case whose status or message is not the expected one.
fn assert_cases(operator: &str) {
    assert_cases_with(operator, &RuleSet::shipped());
}

/// [`assert_cases`] with `rules`.
fn assert_cases_with(operator: &str, rules: &RuleSet) {
    let root = folder(operator);
    let cases: Cases = read_yaml(&root.join("cases.yaml"));
    assert!(!cases.cases.is_empty(), "{operator}: no cases");
    let mut mismatches = Vec::new();
    for case in &cases.cases {
        let object: Value = read_yaml(&root.join(&case.file));
        let Some(health) = rules.assess(&object) else {
            mismatches.push(format!("{}: no health at all", case.file));
            continue;
        };
        let status = health.status.as_str();
        let message_ok = case
            .message_contains
            .as_deref()
            .is_none_or(|piece| health.message.contains(piece));
        if status != case.status || !message_ok {
            mismatches.push(format!(
                "{}: expected {}{}, got {status}: {}",
                case.file,
                case.status,
                case.message_contains
                    .as_deref()
                    .map(|piece| format!(" with {piece:?}"))
                    .unwrap_or_default(),
                health.message
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{operator}: {} of {} cases disagree:\n  {}",
        mismatches.len(),
        cases.cases.len(),
        mismatches.join("\n  ")
    );
}

#[test]
fn cloudnative_pg_clusters_are_degraded_when_the_operator_reports_a_failed_phase() {
    assert_cases("cloudnative-pg");
}

#[test]
fn strimzi_resources_follow_their_ready_and_not_ready_conditions() {
    assert_cases("strimzi");
}

#[test]
fn prometheus_operator_workloads_need_to_be_available_and_reconciled() {
    assert_cases("prometheus-operator");
}

#[test]
fn knative_resources_follow_their_ready_condition_for_the_current_generation() {
    assert_cases("knative");
}

#[test]
fn tekton_runs_follow_their_succeeded_condition() {
    assert_cases("tekton");
}

#[test]
fn velero_backups_and_restores_are_degraded_when_they_failed_even_partially() {
    assert_cases("velero");
}

#[test]
fn volume_snapshots_are_healthy_once_ready_to_use_and_degraded_on_an_error() {
    assert_cases("volume-snapshot");
}

#[test]
fn kubevirt_machines_stopped_or_paused_by_the_user_are_suspended() {
    assert_cases("kubevirt");
}

#[test]
fn olm_subscriptions_are_degraded_on_a_failure_condition_and_held_for_manual_approval() {
    assert_cases("olm");
}

#[test]
fn karpenter_node_pools_and_claims_follow_their_ready_condition() {
    assert_cases("karpenter");
}

#[test]
fn kyverno_policies_are_healthy_once_ready() {
    assert_cases("kyverno");
}

#[test]
fn elastic_clusters_are_degraded_when_red_or_left_yellow_by_a_finished_reconcile() {
    assert_cases("elastic-eck");
}

#[test]
fn rook_ceph_clusters_are_degraded_on_a_failure_phase_or_health_err() {
    assert_cases("rook-ceph");
}

#[test]
fn istio_configuration_is_degraded_only_by_an_analyzer_error() {
    assert_cases("istio");
}

#[test]
fn mongodb_community_replica_sets_follow_their_phase() {
    assert_cases("mongodb-community");
}

#[test]
fn vault_secrets_operator_auth_is_degraded_when_invalid_and_secrets_wait_for_their_sync() {
    assert_cases("vault-secrets-operator");
}

#[test]
fn the_generic_inference_gets_every_generic_fixture_and_names_the_field_without_shipped_rules() {
    assert_cases_with("generic", &RuleSet::default());
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
