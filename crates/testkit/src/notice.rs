//! A notice fixture for the notifier's tests.

use tether_core::OperationalState;
use tether_core::notice::{Notice, NoticeKind, Severity};

/// A Warning notice of `kind` about Application `namespace/web` with
/// `labels`: converged before, its Deployment now unavailable.
pub fn notice(kind: NoticeKind, namespace: &str, labels: &[(&str, &str)]) -> Notice {
    Notice {
        kind,
        severity: Severity::Warning,
        namespace: namespace.to_string(),
        name: "web".to_string(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        message: "Deployment web: 0/2 replicas available".to_string(),
        revision: Some("3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39".to_string()),
        state: Some(OperationalState::AppliedButFailing),
        previous_state: Some(OperationalState::Converged),
        at: "2025-01-01T00:00:00Z".to_string(),
        key: format!("uid/{}", kind.as_str()),
    }
}
