//! Sync status and the operational state named by the Synced × Healthy matrix.

use crate::health::HealthStatus;

crate::vocabulary! {
    /// Does live state match Git?
    #[derive(Default)]
    pub enum SyncStatus("sync status") {
        Synced,
        OutOfSync,
        /// Not compared yet (or the comparison failed).
        #[default]
        Unknown,
    }
}

crate::vocabulary! {
    /// The four operational states of the Synced × Healthy matrix.
    pub enum OperationalState("operational state") {
        /// Synced and working: nothing to do.
        Converged,
        /// Synced but failing: Git itself is wrong; fix or revert the commit.
        AppliedButFailing,
        /// Working, but not what Git says: a sync is pending or someone
        /// changed the cluster.
        DriftedOrPending,
        /// Out of sync and failing: the sync failed or drift broke it.
        Broken,
    }
}

impl OperationalState {
    /// The state for a sync status and an application health; `None`
    /// before the first comparison.
    ///
    /// Healthy, Suspended and Progressing count as working (a rollout in
    /// progress is not a failure); Missing, Degraded and Unknown as failing
    /// (what cannot be assessed is not assumed to work).
    pub fn of(sync: SyncStatus, health: HealthStatus) -> Option<OperationalState> {
        let working = matches!(
            health,
            HealthStatus::Healthy | HealthStatus::Suspended | HealthStatus::Progressing
        );
        match (sync, working) {
            (SyncStatus::Unknown, _) => None,
            (SyncStatus::Synced, true) => Some(OperationalState::Converged),
            (SyncStatus::Synced, false) => Some(OperationalState::AppliedButFailing),
            (SyncStatus::OutOfSync, true) => Some(OperationalState::DriftedOrPending),
            (SyncStatus::OutOfSync, false) => Some(OperationalState::Broken),
        }
    }
}

crate::vocabulary! {
    /// Where a sync operation stands.
    pub enum OperationPhase("operation phase") {
        /// Applying: a crash now leaves a sync that stopped half-way.
        Running,
        Succeeded,
        Failed,
    }
}

crate::vocabulary! {
    /// Who or what started a sync.
    pub enum Initiator("sync initiator") {
        /// A new commit, with automated sync on.
        Automated = "automated",
        /// Self-heal reverting drift.
        SelfHeal = "self-heal",
        /// A user's sync request (`tether sync`).
        User = "user",
        /// A rollback pinning the app to an earlier revision
        /// (`tether rollback`, `spec.pin`).
        Rollback = "rollback",
        /// A pin lifted: by hand (`tether rollback --clear`), or because
        /// the branch head came to render the pinned state.
        Unpin = "unpin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_corners_of_the_matrix_have_their_names() {
        use HealthStatus::*;
        use OperationalState::*;
        let cases = [
            (SyncStatus::Synced, Healthy, Converged),
            (SyncStatus::Synced, Degraded, AppliedButFailing),
            (SyncStatus::OutOfSync, Healthy, DriftedOrPending),
            (SyncStatus::OutOfSync, Degraded, Broken),
        ];
        for (sync, health, state) in cases {
            assert_eq!(
                OperationalState::of(sync, health),
                Some(state),
                "{sync} {health}"
            );
        }
    }

    #[test]
    fn a_rollout_in_progress_counts_as_working_and_missing_as_failing() {
        assert_eq!(
            OperationalState::of(SyncStatus::Synced, HealthStatus::Progressing),
            Some(OperationalState::Converged)
        );
        assert_eq!(
            OperationalState::of(SyncStatus::OutOfSync, HealthStatus::Missing),
            Some(OperationalState::Broken)
        );
    }

    #[test]
    fn there_is_no_state_before_the_first_comparison() {
        assert_eq!(
            OperationalState::of(SyncStatus::Unknown, HealthStatus::Healthy),
            None
        );
    }
}
