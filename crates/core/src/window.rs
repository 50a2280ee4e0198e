//! Break-glass windows: whether one is open, when to warn before it
//! expires, when to look again, and which emergency changes are new.
//!
//! A window is opened with a time to live, may be extended (each extension
//! is its own audited entry) and closed early; [`WindowTimes`] turns those
//! instants into a [`WindowPhase`] at a given `now`. Time is an input: core
//! has no clock.

use std::fmt;
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use crate::drift::DriftedField;

/// Where a window stands; the same words in status, CLI and events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowPhase {
    /// Self-heal is suspended for the window's scope.
    Open,
    /// The time to live ran out; self-heal resumed.
    Expired,
    /// Closed by an operator before expiry (adopted or reverted).
    Closed,
}

impl WindowPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            WindowPhase::Open => "Open",
            WindowPhase::Expired => "Expired",
            WindowPhase::Closed => "Closed",
        }
    }
}

impl fmt::Display for WindowPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The warning comes at most this long before expiry…
const MAX_WARNING_LEAD: Duration = Duration::from_secs(5 * 60);
/// …and at most this share of the window's whole length (1/5).
const WARNING_SHARE: u32 = 5;

/// The instants that decide a window's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowTimes {
    pub opened_at: SystemTime,
    /// The expiry in force: the last extension's, else the original one.
    pub expires_at: SystemTime,
    pub closed_at: Option<SystemTime>,
}

impl WindowTimes {
    /// The phase at `now`: closed wins over expired, which wins over open.
    pub fn phase(&self, now: SystemTime) -> WindowPhase {
        match self.closed_at {
            Some(closed) if closed <= now => WindowPhase::Closed,
            _ if now >= self.expires_at => WindowPhase::Expired,
            _ => WindowPhase::Open,
        }
    }

    /// When the "expires soon" warning is due: five minutes before expiry,
    /// or a fifth of the window's length before it for short windows.
    pub fn warn_at(&self) -> SystemTime {
        let length = self
            .expires_at
            .duration_since(self.opened_at)
            .unwrap_or_default();
        let lead = (length / WARNING_SHARE).min(MAX_WARNING_LEAD);
        self.expires_at - lead
    }

    /// The next instant after `now` at which the window changes (the
    /// warning, then the expiry), or `None` once it is over.
    pub fn next_deadline(&self, now: SystemTime) -> Option<SystemTime> {
        if self.phase(now) != WindowPhase::Open {
            return None;
        }
        let warn = self.warn_at();
        Some(if now < warn { warn } else { self.expires_at })
    }
}

/// Why a time to live was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("time to live {text:?}: {reason} (use e.g. 90s, 30m, 2h, 1h30m)")]
pub struct TtlError {
    text: String,
    reason: &'static str,
}

/// Parses a time to live like `2h`, `30m`, `90s` or `1h30m`. Zero is
/// refused: a window that is expired when opened records nothing.
pub fn parse_ttl(text: &str) -> Result<Duration, TtlError> {
    let error = |reason| TtlError {
        text: text.to_string(),
        reason,
    };
    let mut total = Duration::ZERO;
    let mut digits = String::new();
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            'd' => 86_400,
            'h' => 3_600,
            'm' => 60,
            's' => 1,
            _ => return Err(error("unknown unit")),
        };
        let count: u64 = digits
            .parse()
            .map_err(|_| error("a unit without a number"))?;
        total += Duration::from_secs(count.saturating_mul(unit));
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(error("a number without a unit"));
    }
    if total.is_zero() {
        return Err(error("must be longer than zero"));
    }
    Ok(total)
}

/// Whether `fields`, seen now on an object, are a change the window has not
/// recorded yet: the object's last record (`previous`) had other fields or
/// other live values.
pub fn is_new_change(previous: Option<&[DriftedField]>, fields: &[DriftedField]) -> bool {
    let key = |fields: &[DriftedField]| -> Vec<(String, Option<serde_json::Value>)> {
        let mut key: Vec<_> = fields
            .iter()
            .map(|f| (f.path.clone(), f.live.clone()))
            .collect();
        key.sort_by(|a, b| a.0.cmp(&b.0));
        key
    };
    previous.is_none_or(|previous| key(previous) != key(fields))
}

/// The digest that chains an audit record to the one before it:
/// SHA-256 over the previous digest and this record's bytes, hex. Changing
/// or removing any earlier record breaks every digest after it.
pub fn chain_digest(previous: &str, record: &[u8]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(previous.as_bytes());
    hasher.update(b"\n");
    hasher.update(record);
    hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    fn times(opened: u64, expires: u64) -> WindowTimes {
        WindowTimes {
            opened_at: at(opened),
            expires_at: at(expires),
            closed_at: None,
        }
    }

    #[test]
    fn a_window_is_open_until_it_expires() {
        let window = times(1000, 1000 + 7200);
        assert_eq!(window.phase(at(1000)), WindowPhase::Open);
        assert_eq!(window.phase(at(8199)), WindowPhase::Open);
        assert_eq!(window.phase(at(8200)), WindowPhase::Expired);
    }

    #[test]
    fn a_closed_window_is_closed_even_before_its_expiry() {
        let window = WindowTimes {
            closed_at: Some(at(2000)),
            ..times(1000, 9000)
        };
        assert_eq!(window.phase(at(1999)), WindowPhase::Open);
        assert_eq!(window.phase(at(2000)), WindowPhase::Closed);
        assert_eq!(window.phase(at(9999)), WindowPhase::Closed);
    }

    #[test]
    fn a_long_window_warns_five_minutes_before_expiry() {
        let window = times(0, 7200);
        assert_eq!(window.warn_at(), at(7200 - 300));
    }

    #[test]
    fn a_short_window_warns_a_fifth_of_its_length_before_expiry() {
        let window = times(0, 20);
        assert_eq!(window.warn_at(), at(16));
    }

    #[test]
    fn the_next_deadline_is_the_warning_then_the_expiry_then_none() {
        let window = times(0, 100);
        assert_eq!(window.next_deadline(at(10)), Some(at(80)));
        assert_eq!(window.next_deadline(at(85)), Some(at(100)));
        assert_eq!(window.next_deadline(at(100)), None);
    }

    #[test]
    fn ttls_read_like_kubectl_durations() {
        assert_eq!(parse_ttl("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_ttl("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_ttl("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_ttl("1d"), Ok(Duration::from_secs(86_400)));
    }

    #[test]
    fn bad_ttls_are_refused_with_the_text_named() {
        for text in ["", "0s", "2", "h", "2w", "-1h"] {
            let error = parse_ttl(text).unwrap_err().to_string();
            assert!(error.contains(&format!("{text:?}")), "{error}");
        }
    }

    fn field(path: &str, live: serde_json::Value) -> DriftedField {
        DriftedField {
            path: path.into(),
            pointer: format!("/{}", path.replace('.', "/")),
            desired: Some(json!(1)),
            live: Some(live),
            writer: None,
        }
    }

    #[test]
    fn the_same_change_seen_again_is_not_recorded_twice() {
        let first = [field("spec.replicas", json!(5))];
        assert!(is_new_change(None, &first));
        assert!(!is_new_change(Some(&first), &first));
        let second = [field("spec.replicas", json!(6))];
        assert!(is_new_change(Some(&first), &second));
    }

    #[test]
    fn each_audit_digest_depends_on_every_record_before_it() {
        let one = chain_digest("", b"a");
        let two = chain_digest(&one, b"b");
        assert_eq!(one.len(), 64);
        assert_ne!(two, chain_digest(&chain_digest("", b"x"), b"b"));
    }
}
