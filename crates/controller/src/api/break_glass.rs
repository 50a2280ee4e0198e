//! The `BreakGlass` custom resource: an audited window in which self-heal
//! leaves an application (or some of its objects) alone.
//!
//! The object is the audit record. Who opened it is the requester's
//! identity as the API server saw it (a SelfSubjectReview; the admission
//! policy `tether install` adds refuses any other name), why is the
//! incident reference, and every change made inside it is appended to its
//! status and to the append-only audit log (see `crate::break_glass::audit`).
//! Extending and closing are entries of their own, each with its author.
//! Tether never deletes a window.

use std::time::{Duration, SystemTime};

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tether_core::ObjectRef;
use tether_core::audit::ChainState;
use tether_core::drift::DriftedField;
use tether_core::window::{
    Grant, GrantError, WindowPhase, WindowTimes, check_grants, is_privileged_group,
};

use super::application::Condition;
use super::schema::open_object_list;
use super::schema::word;

// clippy reads the repeated `type_ = "string"` of the printcolumn
// arguments as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tether.dev",
    version = "v1alpha1",
    kind = "BreakGlass",
    namespaced,
    status = "BreakGlassStatus",
    shortname = "bg",
    category = "tether",
    doc = "A break-glass window: self-heal suspended for an application's scope, with who, why and until when.",
    printcolumn(name = "App", type_ = "string", json_path = ".spec.application"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Opened-By",
        type_ = "string",
        json_path = ".spec.openedBy.username"
    ),
    printcolumn(name = "Expires", type_ = "string", json_path = ".status.expiresAt"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".spec.reason")
)]
#[serde(rename_all = "camelCase")]
pub struct BreakGlassSpec {
    /// The Application, in this namespace, whose self-heal is suspended.
    pub application: String,
    /// The objects in scope; empty means the whole application.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ScopedResource>,
    /// Why: an incident reference and a sentence (`INC-1234: …`).
    pub reason: String,
    /// The requester, as the API server authenticated them.
    pub opened_by: Identity,
    /// The original expiry (RFC 3339). Extensions add their own entries.
    pub expires_at: String,
    /// Each extension, in order; the last one's expiry is in force.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<Extension>,
    /// Set once, when an operator closes the window early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close: Option<Closing>,
}

/// One object in a window's scope. Namespace defaults to the
/// application's destination namespace.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScopedResource {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ScopedResource {
    /// The object this names, its namespace defaulted to `namespace`.
    pub fn object(&self, namespace: &str) -> ObjectRef {
        ObjectRef {
            group: self.group.clone(),
            kind: self.kind.clone(),
            namespace: Some(
                self.namespace
                    .clone()
                    .unwrap_or_else(|| namespace.to_string()),
            ),
            name: self.name.clone(),
        }
    }
}

/// A user as the API server authenticated them.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    pub username: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// A later expiry, who asked for it and why.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Extension {
    pub by: String,
    pub at: String,
    pub expires_at: String,
    pub reason: String,
}

/// How an operator ended the window.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Closing {
    pub by: String,
    pub at: String,
    /// What becomes of the window's changes.
    #[schemars(schema_with = "word::<Resolution>")]
    pub resolve: Resolution,
}

tether_core::vocabulary! {
    /// What becomes of a window's changes when it is closed.
    pub enum Resolution("resolution") {
        /// The changes were written back into Git (`tether adopt`).
        Adopt = "adopt",
        /// Self-heal converges the cluster back to Git.
        Revert = "revert",
    }
}

/// Observed state, written by Tether.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BreakGlassStatus {
    /// Open, Expired, Closed, or Invalid (the window names no application
    /// or its times do not parse; it suspends nothing).
    // Optional: a schema of its own does not say so.
    #[serde(default)]
    #[schemars(schema_with = "word::<WindowPhase>")]
    pub phase: Option<WindowPhase>,
    /// The expiry in force.
    pub expires_at: Option<String>,
    /// When the "expires soon" warning was sent.
    pub warned_at: Option<String>,
    /// Extensions already announced (an Event each).
    #[serde(default)]
    pub extensions_seen: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The newest emergency changes (at most 20); the audit log has all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "open_object_list")]
    pub records: Vec<EmergencyRecord>,
    /// Changes recorded in all, and the digest of the last audit record.
    #[serde(default)]
    pub record_count: u64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub audit_digest: String,
    /// The controller's verdict on the audit log, checked with its key
    /// whenever the window or one of its records changes.
    pub audit_chain: Option<AuditChainStatus>,
}

/// The verdict on a window's audit log.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditChainStatus {
    /// Intact, Unkeyed (records from before keying), Gap or Forged.
    #[schemars(schema_with = "word::<ChainState>")]
    pub state: ChainState,
    pub message: String,
    /// Where the records are: the controller's namespace.
    pub namespace: String,
    /// Records found in the chain.
    pub records: u64,
}

/// Emergency records kept in status.
pub const RECORDS_IN_STATUS: usize = 20;

/// One change made inside the window: the object, the fields with desired
/// and live values and their writer, and the audit record that holds it.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EmergencyRecord {
    pub sequence: u64,
    pub object: ObjectRef,
    pub fields: Vec<DriftedField>,
    pub recorded_at: String,
    /// The ConfigMap of the audit log holding the full record.
    pub audit: String,
}

/// Why a window's spec cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error("BreakGlass {window}: {field}: {value:?} is not an RFC 3339 time")]
    BadTime {
        window: String,
        field: &'static str,
        value: String,
    },
    #[error("BreakGlass {window}: expires at {expires} before it was opened ({opened})")]
    ExpiresBeforeOpening {
        window: String,
        expires: String,
        opened: String,
    },
    #[error("BreakGlass {window}: {error}")]
    Grant { window: String, error: GrantError },
    #[error(
        "BreakGlass {window}: spec.openedBy.groups names {group:?}; Kubernetes' system: groups are not for break-glass windows"
    )]
    PrivilegedGroup { window: String, group: String },
}

impl BreakGlass {
    /// The window's instants: opened at creation, the expiry in force, and
    /// the closing time if closed.
    pub fn times(&self) -> Result<WindowTimes, WindowError> {
        let window = format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default()
        );
        let parse = |field: &'static str, value: &str| {
            parse_time(value).ok_or_else(|| WindowError::BadTime {
                window: window.clone(),
                field,
                value: value.to_string(),
            })
        };
        let opened_at = match &self.metadata.creation_timestamp {
            Some(time) => SystemTime::from(time.0),
            None => SystemTime::now(),
        };
        let expires_at = match self.spec.extensions.last() {
            Some(extension) => parse("spec.extensions[-1].expiresAt", &extension.expires_at)?,
            None => parse("spec.expiresAt", &self.spec.expires_at)?,
        };
        let closed_at = match &self.spec.close {
            Some(close) => Some(parse("spec.close.at", &close.at)?),
            None => None,
        };
        if expires_at < opened_at {
            return Err(WindowError::ExpiresBeforeOpening {
                window,
                expires: self.expires_at().to_string(),
                opened: format_time(opened_at),
            });
        }
        Ok(WindowTimes {
            opened_at,
            expires_at,
            closed_at,
        })
    }

    /// [`Self::times`], for a window the controller honours: no grant (the
    /// opening, each extension) longer than `cap`, no extension dated
    /// after the expiry it extends, and no Kubernetes `system:` group
    /// claimed for its opener.
    pub fn checked_times(&self, cap: Duration) -> Result<WindowTimes, WindowError> {
        let times = self.times()?;
        let window = format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or_default(),
            self.metadata.name.as_deref().unwrap_or_default()
        );
        if let Some(group) = self
            .spec
            .opened_by
            .groups
            .iter()
            .find(|g| is_privileged_group(g))
        {
            return Err(WindowError::PrivilegedGroup {
                window,
                group: group.clone(),
            });
        }
        let bad = |field: &'static str, value: &str| WindowError::BadTime {
            window: window.clone(),
            field,
            value: value.to_string(),
        };
        let mut grants = vec![Grant {
            at: times.opened_at,
            until: parse_time(&self.spec.expires_at)
                .ok_or_else(|| bad("spec.expiresAt", &self.spec.expires_at))?,
        }];
        for extension in &self.spec.extensions {
            grants.push(Grant {
                at: parse_time(&extension.at)
                    .ok_or_else(|| bad("spec.extensions[].at", &extension.at))?,
                until: parse_time(&extension.expires_at)
                    .ok_or_else(|| bad("spec.extensions[].expiresAt", &extension.expires_at))?,
            });
        }
        check_grants(&grants, cap).map_err(|error| WindowError::Grant { window, error })?;
        Ok(times)
    }

    /// The expiry in force, as written.
    pub fn expires_at(&self) -> &str {
        match self.spec.extensions.last() {
            Some(extension) => &extension.expires_at,
            None => &self.spec.expires_at,
        }
    }
}

/// Parses an RFC 3339 time.
pub fn parse_time(text: &str) -> Option<SystemTime> {
    let timestamp: k8s_openapi::jiff::Timestamp = text.parse().ok()?;
    Some(SystemTime::from(timestamp))
}

/// Formats `time` as RFC 3339 (UTC, whole seconds, rounded down: a time
/// written now is never in the future).
pub fn format_time(time: SystemTime) -> String {
    let seconds = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .unwrap_or_default()
        .to_string()
}

/// Window `shop/inc-1234` for app `web`, opened by alice (group oncall)
/// at 10:00 on 2026-12-02 until `expires`: the unit tests' window.
#[cfg(test)]
pub(crate) fn test_window(expires: &str) -> BreakGlass {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "tether.dev/v1alpha1", "kind": "BreakGlass",
        "metadata": {"name": "inc-1234", "namespace": "shop",
                     "creationTimestamp": "2026-12-02T10:00:00Z"},
        "spec": {"application": "web", "reason": "INC-1234: checkout down",
                 "openedBy": {"username": "alice", "groups": ["oncall"]},
                 "expiresAt": expires}
    }))
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(expires: &str) -> BreakGlass {
        test_window(expires)
    }

    #[test]
    fn a_window_is_open_from_creation_to_its_expiry() {
        let times = window("2026-12-02T12:00:00Z").times().unwrap();
        assert_eq!(
            times.expires_at,
            parse_time("2026-12-02T12:00:00Z").unwrap()
        );
        assert_eq!(times.opened_at, parse_time("2026-12-02T10:00:00Z").unwrap());
    }

    #[test]
    fn the_last_extension_sets_the_expiry_in_force() {
        let mut window = window("2026-12-02T12:00:00Z");
        window.spec.extensions.push(Extension {
            by: "bob".into(),
            at: "2026-12-02T11:50:00Z".into(),
            expires_at: "2026-12-02T14:00:00Z".into(),
            reason: "still mitigating".into(),
        });
        assert_eq!(window.expires_at(), "2026-12-02T14:00:00Z");
    }

    #[test]
    fn a_malformed_expiry_names_the_window_and_the_field() {
        let error = window("tomorrow").times().unwrap_err().to_string();
        assert_eq!(
            error,
            "BreakGlass shop/inc-1234: spec.expiresAt: \"tomorrow\" is not an RFC 3339 time"
        );
    }

    #[test]
    fn a_window_beyond_the_cap_or_claiming_a_system_group_is_not_honoured() {
        let cap = tether_core::window::DEFAULT_MAX_TTL;
        assert!(window("2026-12-03T10:00:00Z").checked_times(cap).is_ok());
        let error = window("2999-01-01T00:00:00Z")
            .checked_times(cap)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("BreakGlass shop/inc-1234: the opening lasts ")
                && error.ends_with("longer than the cap of 1d"),
            "{error}"
        );
        let mut masters = window("2026-12-02T12:00:00Z");
        masters.spec.opened_by.groups = vec!["oncall".into(), "system:masters".into()];
        assert!(matches!(
            masters.checked_times(cap),
            Err(WindowError::PrivilegedGroup { .. })
        ));
    }

    #[test]
    fn an_expiry_before_the_opening_is_refused() {
        let error = window("2026-12-01T00:00:00Z").times().unwrap_err();
        assert!(matches!(error, WindowError::ExpiresBeforeOpening { .. }));
    }
}
