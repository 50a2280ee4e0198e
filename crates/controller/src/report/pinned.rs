//! What status says of a rollback's pin (`spec.pin`): condition `Pinned`,
//! the sync status against the branch head, and a history entry when a
//! pin is lifted. Pure; [`super::status`] writes what [`record`] decides.

use tether_core::ConditionStatus::{self, False, True};
use tether_core::rollback::PinVerdict;

use crate::api::pin::{CLEARED_REASON, PINNED_REASON, PinState};

/// What to write of the pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRecord {
    /// Condition `Pinned`: status, reason, message.
    pub condition: (ConditionStatus, &'static str, String),
    /// While a pin holds the app at another commit than the branch head:
    /// what `sync.comparedTo` says (the app is OutOfSync).
    pub out_of_sync: Option<String>,
    /// A pin lifted this reconcile: the revision and why, for history.
    pub lifted: Option<(String, &'static str)>,
}

/// What `pin` (this reconcile's finding; `None`: no pin) means for status,
/// given whether condition `Pinned` was True (`was_pinned`). `None`: the
/// app was not and is not pinned. While a pin holds, the app is OutOfSync:
/// live matches the pinned revision, not the branch head, and the
/// not-Synced alert keeps counting so the pin stays visible.
pub fn record(
    pin: Option<&PinState>,
    was_pinned: bool,
    synced_revision: Option<&str>,
) -> Option<PinRecord> {
    match pin {
        Some(state) if state.verdict == PinVerdict::Hold => Some(PinRecord {
            condition: (
                True,
                PINNED_REASON,
                format!(
                    "{}; the branch head is {}",
                    state.pin.describe(),
                    state.head
                ),
            ),
            out_of_sync: (state.head != state.pin.revision).then(|| {
                format!(
                    "{} (branch head; live is pinned to {})",
                    state.head, state.pin.revision
                )
            }),
            lifted: None,
        }),
        Some(state) => Some(PinRecord {
            condition: (
                False,
                PinVerdict::GIT_MATCHES,
                format!(
                    "branch head {} renders what the pinned {} did: pin lifted",
                    state.head, state.pin.revision
                ),
            ),
            out_of_sync: None,
            lifted: was_pinned.then(|| (state.head.clone(), PinVerdict::GIT_MATCHES)),
        }),
        None if was_pinned => Some(PinRecord {
            condition: (
                False,
                CLEARED_REASON,
                "spec.pin was removed: the app follows its source again".to_string(),
            ),
            out_of_sync: None,
            lifted: Some((
                synced_revision.unwrap_or_default().to_string(),
                CLEARED_REASON,
            )),
        }),
        None => None,
    }
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

    #[test]
    fn a_held_pin_is_a_true_condition_and_out_of_sync_with_the_branch_head() {
        let record = record(Some(&state(PinVerdict::Hold)), false, Some("c2")).unwrap();
        let (status, reason, message) = &record.condition;
        assert_eq!((*status, *reason), (True, PINNED_REASON));
        assert!(message.contains("c2") && message.contains("alice") && message.contains("INC-7"));
        assert!(message.contains("since 2026-12-05T17:00:00Z"));
        assert!(record.out_of_sync.unwrap().starts_with("c3 (branch head"));
        assert!(record.lifted.is_none());
    }

    #[test]
    fn a_pin_git_matches_lifts_once_with_a_history_entry() {
        let lifted = record(Some(&state(PinVerdict::GitMatches)), true, Some("c2")).unwrap();
        assert_eq!(lifted.condition.1, "GitMatches");
        assert_eq!(lifted.lifted, Some(("c3".to_string(), "GitMatches")));
        // Reported again (the spec still carried the pin): no second entry.
        let again = record(Some(&state(PinVerdict::GitMatches)), false, Some("c3")).unwrap();
        assert!(again.lifted.is_none());
        assert!(record(None, false, Some("c3")).is_none());
    }

    #[test]
    fn a_pin_removed_by_hand_is_cleared_with_a_history_entry() {
        let cleared = record(None, true, Some("c3")).unwrap();
        assert_eq!(cleared.condition.0, False);
        assert_eq!(cleared.condition.1, CLEARED_REASON);
        assert_eq!(cleared.lifted, Some(("c3".to_string(), CLEARED_REASON)));
    }
}
