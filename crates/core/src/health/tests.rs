//! Unit tests of the vocabulary and of a few checks; the conformance
//! runner (tests/health_conformance.rs) covers the checks on peer fixtures.

use serde_json::json;

use super::*;

fn health(status: HealthStatus, message: &str) -> Health {
    Health::new(status, message)
}

#[test]
fn statuses_are_ordered_from_healthy_to_unknown() {
    use HealthStatus::*;
    assert!(Healthy < Suspended && Suspended < Progressing && Progressing < Missing);
    assert!(Missing < Degraded && Degraded < Unknown);
    assert_eq!(Progressing.worst(Degraded), Degraded);
    assert_eq!("Suspended".parse::<HealthStatus>(), Ok(Suspended));
    assert!("Fine".parse::<HealthStatus>().is_err());
}

#[test]
fn app_health_is_the_worst_resource_and_names_it() {
    let resources = [
        health(
            HealthStatus::Healthy,
            "Deployment web: 3/3 replicas available",
        ),
        health(
            HealthStatus::Degraded,
            "Pod web-7f9: container app in CrashLoopBackOff (restarts 5)",
        ),
        health(
            HealthStatus::Progressing,
            "Deployment api: 1/2 replicas available, rollout in progress",
        ),
    ];
    let app = app_health(&resources);
    assert_eq!(app.status, HealthStatus::Degraded);
    assert_eq!(
        app.message,
        "1 of 3 resources Degraded; first: Pod web-7f9: container app in CrashLoopBackOff (restarts 5)"
    );
}

#[test]
fn an_app_without_resources_with_health_is_healthy() {
    assert_eq!(app_health(&[]).status, HealthStatus::Healthy);
    let all_good = [
        health(HealthStatus::Healthy, "a"),
        health(HealthStatus::Healthy, "b"),
    ];
    assert_eq!(app_health(&all_good).message, "2 of 2 resources healthy");
}

#[test]
fn an_object_being_deleted_is_progressing_whatever_its_kind() {
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "deletionTimestamp": "2026-01-01T00:00:00Z"}});
    assert_eq!(
        assess(&config_map),
        Some(health(
            HealthStatus::Progressing,
            "ConfigMap c: pending deletion"
        ))
    );
}

#[test]
fn a_kind_without_a_check_or_conventions_has_no_health() {
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    assert_eq!(assess(&config_map), None);
}

#[test]
fn a_rollout_in_progress_names_replicas_available() {
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "generation": 2}, "spec": {"replicas": 3},
        "status": {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 2}});
    assert_eq!(
        assess(&deployment),
        Some(health(
            HealthStatus::Progressing,
            "Deployment web: 2/3 replicas available, rollout in progress"
        ))
    );
}

#[test]
fn a_crash_looping_container_is_degraded_with_its_restart_count() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-7f9"},
        "status": {"phase": "Running", "containerStatuses": [{"name": "app", "restartCount": 5,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
    assert_eq!(
        assess(&pod),
        Some(health(
            HealthStatus::Degraded,
            "Pod web-7f9: container app in CrashLoopBackOff (restarts 5)"
        ))
    );
}

#[test]
fn a_pod_unschedulable_past_the_grace_period_is_degraded() {
    let pod = |created: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "creationTimestamp": created},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
    };
    let created = "2026-01-01T00:00:00Z";
    let at = field::timestamp(created).unwrap();
    assert_eq!(
        assess_at(&pod(created), at + 10).unwrap().status,
        HealthStatus::Progressing
    );
    assert_eq!(
        assess_at(&pod(created), at + pod::UNSCHEDULABLE_GRACE_SECONDS + 1)
            .unwrap()
            .status,
        HealthStatus::Degraded
    );
}

#[test]
fn a_missing_object_is_reported_by_name() {
    assert_eq!(
        Health::missing("Deployment shop/web").message,
        "Deployment shop/web: missing from the cluster"
    );
}
