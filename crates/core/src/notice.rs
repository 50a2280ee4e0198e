//! Notices: what happened to an Application that a person may want to be
//! told about — as a Kubernetes Event, and as a notification to a chat or
//! an incident tool. One typed word per kind of happening, so Events,
//! notification routes and payloads all say the same thing.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::OperationalState;

crate::vocabulary! {
    /// The kinds of happening a notification route can subscribe to; the
    /// words are what routes list in their `events`.
    pub enum NoticeKind("notification event") {
        /// The operational state moved (e.g. Converged → AppliedButFailing).
        StateChanged = "state-changed",
        /// Not Synced for longer than the app's `alertNotSyncedAfter`.
        NotSyncedTooLong = "not-synced-too-long",
        /// The app is Synced again after `NotSyncedTooLong` was raised.
        NotSyncedTooLongCleared = "not-synced-too-long-cleared",
        /// Live state departed from Git (a new drift, not one seen before).
        DriftDetected = "drift-detected",
        /// Self-heal backed off: another writer keeps changing a field.
        SelfHealFighting = "self-heal-fighting",
        BreakGlassOpened = "break-glass-opened",
        /// An open window ends within 15 minutes.
        BreakGlassExpiring = "break-glass-expiring",
        BreakGlassExpired = "break-glass-expired",
        BreakGlassClosed = "break-glass-closed",
        SyncFailed = "sync-failed",
    }
}

crate::vocabulary! {
    /// How much a notice matters: Normal, or Warning (something needs a
    /// person); the Kubernetes Event types.
    pub enum Severity("severity") {
        Normal,
        Warning,
    }
}

crate::vocabulary! {
    /// The reasons of the Kubernetes Events Tether writes (`kubectl get
    /// events`, `kubectl describe`): about an Application, or about a
    /// BreakGlass window (and its Application).
    pub enum EventReason("event reason") {
        /// A sync began: who started it, how many objects, which commit.
        SyncStarted,
        SyncSucceeded,
        SyncFailed,
        /// Live departed from Git and is left (self-heal off, warn mode or
        /// opted out).
        DriftDetected,
        DriftReverted,
        /// A change made in an open break-glass window, kept.
        EmergencyChange,
        /// Self-heal stopped fighting another writer of a field.
        SelfHealBackOff,
        /// The prune circuit breaker held deletions back.
        PruneBlocked,
        Pruned,
        /// An object no longer in Git that is kept (prune off, or not
        /// Tether's to delete).
        OrphanDetected,
        HealthChanged,
        NotSyncedTooLong,
        NotSyncedTooLongCleared,
        /// A destination namespace that did not exist was created
        /// (`syncPolicy.createNamespace`).
        NamespaceCreated,
        /// Deleting an Application deletes its objects first (cascade).
        CascadeDeleting,
        CascadeFailed,
        /// An Application that does not decode: reported, not reconciled.
        InvalidSpec,
        BreakGlassOpened,
        BreakGlassExtended,
        /// An open window ends within 15 minutes.
        BreakGlassExpiring,
        BreakGlassExpired,
        BreakGlassClosed,
        /// A window that names no Application or is granted for too long:
        /// nothing is suspended.
        BreakGlassInvalid,
        /// The break-glass audit log does not verify with the key.
        AuditLogBroken,
    }
}

/// One happening to one Application, ready to be sent anywhere. It names
/// objects and fields but never carries a value of a Secret.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    pub kind: NoticeKind,
    pub severity: Severity,
    /// The Application's namespace and name.
    pub namespace: String,
    pub name: String,
    /// The Application's labels (routes select apps by them).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// One sentence: what happened, and why where it is known.
    pub message: String,
    /// The Git revision in question, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The operational state after the happening (and before it, for
    /// [`NoticeKind::StateChanged`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<OperationalState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_state: Option<OperationalState>,
    /// When it happened (RFC 3339).
    pub at: String,
    /// The same happening always has the same key (a receiver de-duplicates
    /// on it): the app's uid, the kind and what distinguishes this
    /// occurrence (e.g. the time the condition was raised).
    pub key: String,
}

#[cfg(test)]
mod tests {
    use super::EventReason;
    use crate::Vocabulary;

    #[test]
    fn the_readme_lists_every_event_reason() {
        let missing = EventReason::unnamed_in(include_str!("../../../README.md"));
        assert!(missing.is_empty(), "README.md does not list {missing:?}");
    }
}
