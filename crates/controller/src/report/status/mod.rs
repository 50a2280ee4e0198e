//! The next Application status, computed from what a reconcile saw and did.
//!
//! [`next_status`] is a pure function of the previous status and the
//! reconcile's observations, so "write only when changed" is a comparison of
//! two values, and the whole status is tested without an API server.
//!
//! Its parts: `resources` (each object's status), `operation` (what a sync
//! leaves: the operation, the history, the inventory), `record` (drift and
//! orphans kept on record) and `conditions`.

mod conditions;
mod operation;
mod record;
mod resources;

use std::time::Duration;

use tether_core::argocd::Warning;
use tether_core::health::{Health, HealthStatus, app_health};
use tether_core::revision::RevisionChange;
use tether_core::{Action, Initiator, ObjectRef, OperationPhase, OperationalState, SyncStatus};

use crate::api::application::{
    ApplicationStatus, Condition, HealthInfo, HookRun, ResourceStatus, WaveWait,
};
use crate::observe::compare::Compared;
use crate::observe::drift::{Assessed, Response};
use crate::observe::health::Judge;
use crate::sync::SyncReport;
use crate::sync::prune::PruneReport;

use conditions::{
    set_health_rules_condition, set_not_synced_condition, set_problem_condition,
    set_reconciled_condition, unsupported_message,
};
use operation::{record_pin, record_sync};
use record::{record_drift, record_prune};
use resources::{generated_of, object_health, other_writers_of, resource_status};

pub use crate::api::application::{
    BACK_OFF_CONDITION, NOT_SYNCED_TOO_LONG_CONDITION, PRUNE_BLOCKED_CONDITION,
    RECONCILED_CONDITION, SYNC_WINDOW_CONDITION, UNSUPPORTED_CONDITION,
};
/// At most this many objects in `resources` and `operationState.changes`:
/// a status must stay well under what the API server and etcd accept in
/// one object (an app of 20,000 objects listed in full was refused).
pub const RESOURCES_LIMIT: usize = 200;

tether_core::vocabulary! {
    /// The step of the loop that failed; its word is the reason of the
    /// [`RECONCILED_CONDITION`].
    pub enum Step("reconcile step") {
        /// Choosing whom the app's changes are made as
        /// (`tether_core::identity`): a ServiceAccount is required.
        Identity = "ServiceAccountRequired",
        /// Admitting the app and its objects to its Project
        /// (`tether_core::project`).
        Project = "ProjectViolation",
        /// Fetching the repository (or its credentials).
        Fetch = "FetchFailed",
        /// Verifying the commit's signature.
        Verify = "VerifyFailed",
        /// Rendering the manifests (Helm, Kustomize, Jsonnet, YAML).
        Render = "RenderFailed",
        /// Admitting the commit's namespaces (`tether_core::ownership`).
        Destination = "NamespaceNotAllowed",
        Diff = "DiffFailed",
        /// Admitting the objects other apps hold or nobody gave this app.
        Ownership = "OwnershipConflict",
        /// The API server refused the commit's objects in the dry run
        /// before any was applied (or their sync waves were malformed).
        Validate = "ValidationFailed",
        Apply = "ApplyFailed",
        /// Reaching the destination cluster (`spec.destination.cluster`):
        /// not registered, or not answering.
        Cluster = "ClusterUnreachable",
        /// Waiting for the apps in `spec.dependsOn` to be Synced and
        /// Healthy (`tether_core::dependency`).
        Dependency = "WaitingForDependency",
        /// `spec.dependsOn` leads back to the app itself.
        DependencyCycle = "DependencyCycle",
        /// A sync window is malformed, or refuses a `tether sync`.
        SyncWindow = "SyncWindowRefused",
        /// A sync hook failed or did not finish in time
        /// (`tether_core::hook`); a PreSync hook's failure applied nothing.
        Hook = "HookFailed",
    }
}

tether_core::vocabulary! {
    /// Why an app that no step failed is not Synced; its word is the
    /// reason of the [`NOT_SYNCED_TOO_LONG_CONDITION`] (a failed step's
    /// reason is the [`Step`]'s own word).
    pub enum NotSyncedReason("not-synced reason") {
        /// A rollback pin holds the app at an older revision (`spec.pin`).
        Pinned,
        /// Changes made in an open break-glass window are kept.
        BreakGlassOpen,
        /// Self-heal backed off from another writer of a field.
        SelfHealBackOff,
        /// Drift is reported and left in place (self-heal off, or
        /// `driftResponse: warn`).
        DriftKept,
        /// Live differs from Git and no sync has applied it yet.
        SyncPending,
        /// Live has not been compared with Git yet.
        NotCompared,
    }
}

/// The reason of the [`RECONCILED_CONDITION`] when no step failed.
pub const RECONCILED_REASON: &str = OperationPhase::Succeeded.as_str();

/// A failed step and its message (which names the object or file).
#[derive(Debug, Clone)]
pub struct Failure {
    pub step: Step,
    pub message: String,
}

/// What the desired state was and how live compared with it.
pub struct Observed<'a> {
    pub revision: &'a str,
    pub tree: &'a str,
    /// Digest of the rendered objects at `revision`.
    pub digest: &'a str,
    /// What each source resolved to.
    pub sources: &'a [tether_source::SourceRevision],
    /// How `revision` relates to the last successful sync.
    pub change: RevisionChange,
    pub compared: &'a [Compared],
    /// The health rules in force for this Application.
    pub health: &'a Judge,
    /// The drifted objects and the response to each.
    pub drift: &'a [Assessed],
    pub prune: &'a PruneReport,
    /// Argo CD annotations Tether does not act on.
    pub unsupported: &'a [Warning],
    /// Why a sync window keeps automated syncs and self-heal from
    /// running, while one does.
    pub sync_window: Option<String>,
    /// The app's rollback pin, when it has one (`spec.pin`).
    pub pin: Option<&'a crate::api::pin::PinState>,
}

/// A sync this reconcile ran.
pub struct SyncRun<'a> {
    pub revision: &'a str,
    pub initiator: Initiator,
    pub started_at: &'a str,
    /// The report, or the error and what was applied before it.
    pub outcome: Result<&'a SyncReport, Stopped<'a>>,
    /// Set when the sync is not over but waits for a wave (its outcome is
    /// then why, and what it applied so far).
    pub waiting: Option<WaveWait>,
    /// The sync hooks it ran (or runs).
    pub hooks: &'a [HookRun],
}

/// A failed sync: why, and the objects it had applied before it stopped.
pub type Stopped<'a> = (String, &'a [(ObjectRef, Action)]);

/// The status after this reconcile. `now` is an RFC 3339 timestamp;
/// `alert_after` is how long the app may stay not Synced before
/// [`NOT_SYNCED_TOO_LONG_CONDITION`] is raised.
pub fn next_status(
    previous: Option<&ApplicationStatus>,
    generation: Option<i64>,
    observed: Option<&Observed<'_>>,
    sync: Option<&SyncRun<'_>>,
    failure: Option<&Failure>,
    alert_after: Duration,
    now: &str,
) -> ApplicationStatus {
    let mut status = previous.cloned().unwrap_or_default();
    status.observed_generation = generation;

    if let Some(observed) = observed {
        record_observed(&mut status, observed, now);
    }
    if let Some(sync) = sync {
        record_sync(&mut status, sync, observed, now);
    }
    // An app whose cluster is away is neither known Synced nor Healthy;
    // what it last saw there (resources, drift, history) stays.
    if let Some(away) = failure.filter(|failure| failure.step == Step::Cluster) {
        status.sync.status = SyncStatus::Unknown;
        status.health = HealthInfo {
            status: HealthStatus::Unknown,
            message: away.message.clone(),
        };
    }
    if let Some(observed) = observed {
        let healed = sync.is_some_and(|sync| sync.outcome.is_ok());
        record_drift(&mut status, previous, observed.drift, healed, now);
        record_prune(&mut status, observed);
        set_problem_conditions(&mut status.conditions, observed, now);
        record_pin(&mut status, observed.pin, now);
        bound_resources(&mut status);
    }
    status.state = OperationalState::of(status.sync.status, status.health.status);
    set_reconciled_condition(&mut status.conditions, failure, now);
    set_not_synced_condition(&mut status, failure, alert_after, now);
    status.reconciled_at = previous.and_then(|p| p.reconciled_at.clone());
    if previous != Some(&status) {
        status.reconciled_at = Some(now.to_string());
    }
    status
}

/// What this reconcile observed: each object's status and health, the
/// sync status against `observed.revision`, the app's health, the other
/// writers and generated objects.
fn record_observed(status: &mut ApplicationStatus, observed: &Observed<'_>, now: &str) {
    let judge = observed.health;
    status.resources = observed
        .compared
        .iter()
        .map(|compared| resource_status(compared, judge))
        .collect();
    let in_sync = observed.compared.iter().all(Compared::in_sync);
    status.sync.status = if in_sync {
        SyncStatus::Synced
    } else {
        SyncStatus::OutOfSync
    };
    status.sync.compared_to = Some(format!("{} (tree {})", observed.revision, observed.tree));
    status.sync.sources = observed
        .sources
        .iter()
        .map(|source| crate::api::application::SourceStatus {
            name: source.name.clone(),
            repo_url: source.repo_url.clone(),
            chart: source.chart.clone(),
            revision: source.revision.clone(),
            digest: source.digest.clone(),
        })
        .collect();
    if observed.change == RevisionChange::SameObjects {
        status.sync.revision = Some(observed.revision.to_string());
    }
    let healths: Vec<Health> = observed
        .compared
        .iter()
        .filter_map(|compared| object_health(compared, judge))
        .collect();
    let health = app_health(&healths);
    status.health = HealthInfo {
        status: health.status,
        message: health.message,
    };
    set_health_rules_condition(&mut status.conditions, judge, now);
    status.other_writers = other_writers_of(observed.compared);
    status.generated = generated_of(observed.compared, &status.generated);
}

/// The conditions that say what keeps the app from converging, each True
/// with its message while it holds: a sync window, a self-heal fight, a
/// blocked prune, unsupported Argo CD annotations.
fn set_problem_conditions(conditions: &mut Vec<Condition>, observed: &Observed<'_>, now: &str) {
    let fights: Vec<String> = observed
        .drift
        .iter()
        .filter_map(|assessed| match &assessed.response {
            Response::BackOff(fight) => Some(fight.to_string()),
            _ => None,
        })
        .collect();
    let breaker = observed.prune.breaker.as_ref().map(ToString::to_string);
    let fights = (!fights.is_empty()).then(|| fights.join("; "));
    set_problem_condition(
        conditions,
        SYNC_WINDOW_CONDITION,
        "Blocked",
        observed.sync_window.clone(),
        now,
    );
    set_problem_condition(
        conditions,
        BACK_OFF_CONDITION,
        "FightingAnotherWriter",
        fights,
        now,
    );
    set_problem_condition(
        conditions,
        PRUNE_BLOCKED_CONDITION,
        "CircuitBreaker",
        breaker,
        now,
    );
    set_problem_condition(
        conditions,
        UNSUPPORTED_CONDITION,
        "ArgoCDAnnotation",
        unsupported_message(observed.unsupported),
        now,
    );
}

/// Whether `next` differs from `previous` only in the revision it records
/// (and when it was reconciled): what a commit that changes none of the
/// app's objects does. Such a write may wait (see [`crate::report::writes`]).
pub fn only_revision_moved(previous: &ApplicationStatus, next: &ApplicationStatus) -> bool {
    let mut moved = previous.clone();
    moved.sync.revision.clone_from(&next.sync.revision);
    moved.sync.compared_to.clone_from(&next.sync.compared_to);
    moved.reconciled_at.clone_from(&next.reconciled_at);
    moved == *next
}

/// Cuts `resources` to [`RESOURCES_LIMIT`], keeping every object that is
/// not Synced and Healthy first; `resourceCount` keeps the total.
fn bound_resources(status: &mut ApplicationStatus) {
    let total = status.resources.len();
    status.resource_count = Some(total);
    if total <= RESOURCES_LIMIT {
        return;
    }
    let fine = |r: &ResourceStatus| {
        r.sync == SyncStatus::Synced
            && r.health
                .as_ref()
                .is_none_or(|h| h.status == HealthStatus::Healthy)
    };
    status.resources.sort_by_key(fine);
    status.resources.truncate(RESOURCES_LIMIT);
}

#[cfg(test)]
mod tests {
    use super::operation::bound_changes;
    use super::*;
    use crate::api::application::{Change, Condition, DriftEntry};
    use serde_json::json;
    use tether_core::drift::{DriftKind, DriftOutcome};
    use tether_core::{ConditionStatus, ObjectRef};

    fn recorded_at(revision: &str, reconciled_at: &str) -> ApplicationStatus {
        let mut status = ApplicationStatus::default();
        status.sync.status = SyncStatus::Synced;
        status.sync.revision = Some(revision.into());
        status.sync.compared_to = Some(format!("{revision} (tree t)"));
        status.health.status = HealthStatus::Healthy;
        status.reconciled_at = Some(reconciled_at.into());
        status
    }

    #[test]
    fn the_readme_names_every_reason_an_app_is_not_synced() {
        let readme = include_str!("../../../../../README.md");
        let missing = <NotSyncedReason as tether_core::Vocabulary>::unnamed_in(readme);
        assert!(missing.is_empty(), "README.md does not name {missing:?}");
    }

    #[test]
    fn a_status_that_only_records_a_new_revision_may_wait() {
        let previous = recorded_at("aaa", "2026-12-02T10:00:00Z");
        let next = recorded_at("bbb", "2026-12-02T10:05:00Z");
        assert!(only_revision_moved(&previous, &next));
    }

    #[test]
    fn a_status_that_changes_anything_else_is_written_at_once() {
        let previous = recorded_at("aaa", "2026-12-02T10:00:00Z");
        let mut next = recorded_at("bbb", "2026-12-02T10:05:00Z");
        next.health.status = HealthStatus::Degraded;
        assert!(!only_revision_moved(&previous, &next));
        let mut next = recorded_at("aaa", "2026-12-02T10:05:00Z");
        next.sync.status = SyncStatus::OutOfSync;
        assert!(!only_revision_moved(&previous, &next));
    }

    #[test]
    fn a_large_app_lists_its_problems_first_and_at_most_the_limit() {
        let resource = |i: usize, sync: SyncStatus| ResourceStatus {
            kind: "ConfigMap".into(),
            name: format!("c{i}"),
            sync,
            ..ResourceStatus::default()
        };
        let mut status = ApplicationStatus {
            resources: (0..20_000)
                .map(|i| resource(i, SyncStatus::Synced))
                .collect(),
            ..ApplicationStatus::default()
        };
        status.resources[12_345] = resource(12_345, SyncStatus::OutOfSync);
        bound_resources(&mut status);
        assert_eq!(status.resources.len(), RESOURCES_LIMIT);
        assert_eq!(status.resources[0].name, "c12345");
        assert_eq!(status.resource_count, Some(20_000));

        let changes: Vec<Change> = (0..20_000)
            .map(|i| Change {
                object: format!("ConfigMap shop/c{i}"),
                action: if i == 19_999 {
                    Action::Configured
                } else {
                    Action::Unchanged
                },
            })
            .collect();
        let (kept, omitted) = bound_changes(changes);
        assert_eq!(
            (kept.len(), omitted),
            (RESOURCES_LIMIT, 20_000 - RESOURCES_LIMIT)
        );
        assert_eq!(kept[0].action, Action::Configured);
    }

    fn not_synced_alert(status: &ApplicationStatus) -> Option<&Condition> {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == NOT_SYNCED_TOO_LONG_CONDITION)
    }

    #[test]
    fn an_app_failing_longer_than_its_threshold_is_not_synced_too_long_until_synced_again() {
        let five_seconds = Duration::from_secs(5);
        let failing = Failure {
            step: Step::Validate,
            message: "Deployment shop/web: spec.replicas: Invalid value".into(),
        };
        let mut synced = ApplicationStatus::default();
        synced.sync.status = SyncStatus::Synced;
        let t = |s: u32| format!("2026-12-03T10:00:{s:02}Z");
        let failing_at = |previous: &ApplicationStatus, s: u32| {
            next_status(
                Some(previous),
                None,
                None,
                None,
                Some(&failing),
                five_seconds,
                &t(s),
            )
        };

        let first = failing_at(&synced, 0);
        assert_eq!(first.sync.not_synced_since.as_deref(), Some(t(0).as_str()));
        assert!(
            not_synced_alert(&first).is_none(),
            "not raised before the threshold"
        );

        let later = failing_at(&first, 4);
        assert_eq!(
            later, first,
            "nothing to write while it waits out the threshold"
        );

        let overdue = failing_at(&first, 6);
        let raised = not_synced_alert(&overdue).expect("raised");
        assert_eq!(
            (raised.status, raised.reason.as_str()),
            (ConditionStatus::True, "ValidationFailed")
        );
        assert_eq!(
            raised.message,
            format!(
                "not Synced for more than 5s (since {}): Deployment shop/web: spec.replicas: Invalid value",
                t(0)
            )
        );
        assert_eq!(
            overdue.sync.not_synced_since.as_deref(),
            Some(t(0).as_str())
        );

        let fixed = next_status(Some(&overdue), None, None, None, None, five_seconds, &t(9));
        let cleared = not_synced_alert(&fixed).expect("kept, False");
        assert_eq!(
            (cleared.status, cleared.reason.as_str()),
            (ConditionStatus::False, "Resolved")
        );
        assert_eq!(fixed.sync.not_synced_since, None);
        assert_eq!(cleared.last_transition_time.as_deref(), Some(t(9).as_str()));
    }

    #[test]
    fn drift_left_by_warn_says_which_objects_are_kept_out_of_sync() {
        let mut status = ApplicationStatus::default();
        status.sync.status = SyncStatus::OutOfSync;
        status.sync.not_synced_since = Some("2026-12-03T09:00:00Z".into());
        status.drift = vec![DriftEntry {
            record: tether_core::drift::DriftRecord {
                object: ObjectRef::from_object(&json!({"apiVersion": "apps/v1",
                    "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"}}))
                .unwrap(),
                kind: DriftKind::Manual,
                fields: Vec::new(),
                detected_at: "2026-12-03T09:00:00Z".into(),
            },
            response: DriftOutcome::Reported,
            resolved_at: None,
        }];
        let next = next_status(
            Some(&status),
            None,
            None,
            None,
            None,
            Duration::from_secs(3600),
            "2026-12-03T10:02:00Z",
        );
        let raised = not_synced_alert(&next).expect("raised");
        assert_eq!(raised.reason, NotSyncedReason::DriftKept.as_str());
        assert!(
            raised.message.starts_with(
                "not Synced for more than 1h (since 2026-12-03T09:00:00Z): drift is reported and left in place"
            ),
            "{}",
            raised.message
        );
        assert!(
            raised.message.contains("Deployment shop/web"),
            "{}",
            raised.message
        );
    }
}
