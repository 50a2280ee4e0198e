//! What status says of a rollback's pin (`spec.pin`): condition `Pinned`,
//! the sync status against the branch head, and a history entry when a
//! pin is lifted. Pure, as [`super::status`].

use tether_core::rollback::PinVerdict;
use tether_core::{Initiator, SyncStatus};

use crate::api::application::{ApplicationStatus, HistoryEntry};
use crate::api::pin::{CLEARED_REASON, PINNED_CONDITION, PINNED_REASON, PinState};

use super::status::{HISTORY_LIMIT, set_condition};

/// Records `pin` (what this reconcile found; `None`: the app has no pin)
/// in `status`. While a pin holds, the app is OutOfSync: live matches the
/// pinned revision, not the branch head, and the not-Synced alert keeps
/// counting so the pin stays visible.
pub fn record_pin(status: &mut ApplicationStatus, pin: Option<&PinState>, now: &str) {
    let was_pinned = status
        .conditions
        .iter()
        .any(|c| c.type_ == PINNED_CONDITION && c.status == "True");
    match pin {
        Some(state) if state.verdict == PinVerdict::Hold => {
            let message = format!(
                "{}; the branch head is {}",
                state.pin.describe(),
                state.head
            );
            set_condition(
                &mut status.conditions,
                PINNED_CONDITION,
                "True",
                PINNED_REASON,
                message,
                now,
            );
            if state.head != state.pin.revision {
                status.sync.status = SyncStatus::OutOfSync;
                status.sync.compared_to = Some(format!(
                    "{} (branch head; live is pinned to {})",
                    state.head, state.pin.revision
                ));
            }
        }
        Some(state) => {
            let message = format!(
                "branch head {} renders what the pinned {} did: pin lifted",
                state.head, state.pin.revision
            );
            if was_pinned {
                lifted(status, &state.head, None, PinVerdict::GIT_MATCHES, now);
            }
            set_condition(
                &mut status.conditions,
                PINNED_CONDITION,
                "False",
                PinVerdict::GIT_MATCHES,
                message,
                now,
            );
        }
        None if was_pinned => {
            let revision = status.sync.revision.clone().unwrap_or_default();
            lifted(status, &revision, None, CLEARED_REASON, now);
            set_condition(
                &mut status.conditions,
                PINNED_CONDITION,
                "False",
                CLEARED_REASON,
                "spec.pin was removed: the app follows its source again".to_string(),
                now,
            );
        }
        None => {}
    }
}

fn lifted(
    status: &mut ApplicationStatus,
    revision: &str,
    by: Option<String>,
    why: &str,
    now: &str,
) {
    let entry = HistoryEntry {
        id: HistoryEntry::next_id(&status.history),
        revision: revision.to_string(),
        time: now.to_string(),
        initiator: Initiator::Unpin,
        by,
        reason: Some(why.to_string()),
    };
    status.history.insert(0, entry);
    status.history.truncate(HISTORY_LIMIT);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::pin::Pin;

    fn state(verdict: PinVerdict) -> PinState {
        PinState {
            pin: Pin {
                revision: "c2".into(),
                history_id: Some(2),
                by: "alice".into(),
                reason: "INC-7".into(),
                since: "2026-12-05T17:00:00Z".into(),
            },
            head: "c3".into(),
            verdict,
        }
    }

    fn pinned(status: &ApplicationStatus) -> (&str, &str) {
        let c = status
            .conditions
            .iter()
            .find(|c| c.type_ == PINNED_CONDITION)
            .unwrap();
        (c.status.as_str(), c.reason.as_str())
    }

    #[test]
    fn a_held_pin_is_a_true_condition_and_out_of_sync_with_the_branch_head() {
        let mut status = ApplicationStatus::default();
        status.sync.status = SyncStatus::Synced;
        record_pin(&mut status, Some(&state(PinVerdict::Hold)), "t1");
        assert_eq!(pinned(&status), ("True", PINNED_REASON));
        assert_eq!(status.sync.status, SyncStatus::OutOfSync);
        let message = &status.conditions[0].message;
        assert!(message.contains("c2") && message.contains("alice") && message.contains("INC-7"));
        assert!(message.contains("since 2026-12-05T17:00:00Z"));
    }

    #[test]
    fn a_pin_git_matches_lifts_once_with_a_history_entry() {
        let mut status = ApplicationStatus::default();
        record_pin(&mut status, Some(&state(PinVerdict::Hold)), "t1");
        record_pin(&mut status, Some(&state(PinVerdict::GitMatches)), "t2");
        assert_eq!(pinned(&status), ("False", "GitMatches"));
        assert_eq!(status.history.len(), 1);
        assert_eq!(status.history[0].initiator, Initiator::Unpin);
        assert_eq!(status.history[0].revision, "c3");
        assert_eq!(status.history[0].reason.as_deref(), Some("GitMatches"));
        // Reported again (the spec still carried the pin): no second entry.
        record_pin(&mut status, Some(&state(PinVerdict::GitMatches)), "t3");
        record_pin(&mut status, None, "t4");
        assert_eq!(status.history.len(), 1);
    }

    #[test]
    fn a_pin_removed_by_hand_is_cleared_with_a_history_entry() {
        let mut status = ApplicationStatus::default();
        record_pin(&mut status, Some(&state(PinVerdict::Hold)), "t1");
        record_pin(&mut status, None, "t2");
        assert_eq!(pinned(&status), ("False", CLEARED_REASON));
        assert_eq!(status.history[0].reason.as_deref(), Some(CLEARED_REASON));
    }
}
