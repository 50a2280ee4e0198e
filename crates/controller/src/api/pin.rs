//! `spec.pin`: an Application held at an earlier revision by a rollback
//! (`tether rollback`), as Flux's `spec.suspend` holds one — in the spec,
//! so it survives a controller restart and shows in `kubectl get -o yaml`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The condition saying whether the app is pinned: True while it is
/// (naming the revision, who, why and since when), False once lifted
/// (reason `GitMatches` or `Cleared`).
pub const PINNED_CONDITION: &str = "Pinned";
/// The reason of a True [`PINNED_CONDITION`].
pub const PINNED_REASON: &str = "RolledBack";
/// The reason of a False [`PINNED_CONDITION`] when the pin was removed by
/// hand (`tether rollback --clear`).
pub const CLEARED_REASON: &str = "Cleared";

/// A rollback's pin: the controller fetches and renders `revision`
/// instead of the source's branch head until the pin is removed (by hand,
/// or by the controller once the branch head renders the same objects).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pin {
    /// The commit the app is held at (of its first source).
    pub revision: String,
    /// The `status.history[].id` the commit was taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_id: Option<u64>,
    /// Who rolled back: the Kubernetes user the API server saw
    /// (a SelfSubjectReview by `tether rollback`).
    #[serde(default)]
    pub by: String,
    /// Why (`tether rollback --reason`).
    #[serde(default)]
    pub reason: String,
    /// When (RFC 3339).
    #[serde(default)]
    pub since: String,
}

/// What a reconcile found of the app's pin: the pin, the branch head it
/// compared against, and whether the pin holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinState {
    pub pin: Pin,
    /// The commit the source's branch (or tag) resolves to now.
    pub head: String,
    pub verdict: tether_core::rollback::PinVerdict,
}

impl Pin {
    /// The message of a True [`PINNED_CONDITION`].
    pub fn describe(&self) -> String {
        let entry = match self.history_id {
            Some(id) => format!(" (history {id})"),
            None => String::new(),
        };
        let reason = match self.reason.trim() {
            "" => String::new(),
            reason => format!(": {reason}"),
        };
        format!(
            "pinned to {}{entry} by {} since {}{reason}",
            self.revision,
            if self.by.is_empty() {
                "unknown"
            } else {
                &self.by
            },
            self.since
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_describes_revision_who_why_and_since() {
        let pin = Pin {
            revision: "a".repeat(40),
            history_id: Some(3),
            by: "alice".into(),
            reason: "INC-7: bad config".into(),
            since: "2026-12-05T17:00:00Z".into(),
        };
        assert_eq!(
            pin.describe(),
            format!(
                "pinned to {} (history 3) by alice since 2026-12-05T17:00:00Z: INC-7: bad config",
                "a".repeat(40)
            )
        );
    }
}
