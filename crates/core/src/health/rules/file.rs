//! The rules file format (YAML), as written by users and by us.
//!
//! ```yaml
//! rules:
//! - group: cert-manager.io          # API group ("" for core); `*` is a glob
//!   kinds: [Certificate]            # kinds; `*` is a glob
//!   suspended: "…"                  # CEL, bool: checked in this order,
//!   degraded: "…"                   #   the first that is true decides
//!   progressing: "…"
//!   healthy: "…"
//!   otherwise: Progressing          # status when none is true (default)
//!   message: "…"                    # CEL, string; `health` is the status
//! ```
//!
//! Expressions see `self` (the object), `conditions` (its
//! `status.conditions` keyed by type) and, in `message`, `health`; besides
//! the standard and Kubernetes CEL functions, `get(value, 'a.b', default)`
//! reads a field that may be missing (`get(conditions, 'Ready.status', '')`).

use serde::Deserialize;

/// A whole rules file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RulesFile {
    /// The rules, in no particular order: lookup prefers exact matches.
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
}

/// One rule as written: which objects it judges and how.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// API group the rule applies to; `*` matches any run of characters.
    pub group: String,
    /// Kinds the rule applies to; `*` matches any run of characters.
    pub kinds: Vec<String>,
    /// CEL: the object is deliberately paused.
    pub suspended: Option<String>,
    /// CEL: the object is failing.
    pub degraded: Option<String>,
    /// CEL: the object is on its way to working.
    pub progressing: Option<String>,
    /// CEL: the object works.
    pub healthy: Option<String>,
    /// The status when no expression is true; Progressing if not given.
    pub otherwise: Option<String>,
    /// CEL: the message, a string (the object's `Kind name: ` is prefixed).
    pub message: Option<String>,
}
