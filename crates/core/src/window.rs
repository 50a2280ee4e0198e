//! Break-glass windows: whether one is open, when to warn before it
//! expires, when to look again, and which emergency changes are new.
//!
//! A window is opened with a time to live, may be extended (each extension
//! is its own audited entry) and closed early; [`WindowTimes`] turns those
//! instants into a [`WindowPhase`] at a given `now`. Time is an input: core
//! has no clock.

use std::time::{Duration, SystemTime};

use crate::drift::DriftedField;

crate::vocabulary! {
    /// Where a window stands; the same words in status, CLI and events.
    pub enum WindowPhase("break-glass phase") {
        /// Self-heal is suspended for the window's scope.
        Open,
        /// The time to live ran out; self-heal resumed.
        Expired,
        /// Closed by an operator before expiry (adopted or reverted).
        Closed,
        /// The window names no application, its times do not parse, or it
        /// was granted longer than allowed: it suspends nothing. Never the
        /// phase of [`WindowTimes`], which only valid windows have.
        Invalid,
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
    pub(crate) text: String,
    pub(crate) reason: &'static str,
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
        total = total
            .checked_add(Duration::from_secs(count.saturating_mul(unit)))
            .ok_or_else(|| error("too long"))?;
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

/// The fields of `fields`, seen drifted now on an object, that the window
/// has not recorded yet: those whose live value differs from the one the
/// window knows for that path (`known`: what it last saw drifted on the
/// object). A field seen again with the same live value is not a new
/// change, even when another field of the object changed next to it.
pub fn new_fields(known: Option<&[DriftedField]>, fields: &[DriftedField]) -> Vec<DriftedField> {
    let known = known.unwrap_or_default();
    fields
        .iter()
        .filter(|field| {
            !known
                .iter()
                .any(|seen| seen.path == field.path && seen.live == field.live)
        })
        .cloned()
        .collect()
}

/// The longest a window may be granted at once, unless `tether run
/// --max-break-glass-ttl` says otherwise: a day.
pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(24 * 3600);

/// Why a time to live is refused: longer than the cap.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "time to live {}: longer than the cap of {} (extend the window when it is about to expire)",
    format_ttl(*ttl),
    format_ttl(*cap)
)]
pub struct TtlTooLong {
    pub ttl: Duration,
    pub cap: Duration,
}

/// `ttl` if it is within `cap`.
pub fn within_cap(ttl: Duration, cap: Duration) -> Result<Duration, TtlTooLong> {
    if ttl > cap {
        return Err(TtlTooLong { ttl, cap });
    }
    Ok(ttl)
}

/// `1d2h`, `90m` → `1h30m`, as [`parse_ttl`] reads it.
pub fn format_ttl(ttl: Duration) -> String {
    let mut left = ttl.as_secs();
    let mut text = String::new();
    for (unit, seconds) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        let count = left / seconds;
        if count > 0 {
            text.push_str(&format!("{count}{unit}"));
            left %= seconds;
        }
    }
    if text.is_empty() {
        text.push_str("0s");
    }
    text
}

/// One grant of time: the original opening, or an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// When it was granted: the window's creation, or the extension's `at`.
    pub at: SystemTime,
    pub until: SystemTime,
}

/// Why a window's grants are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    #[error("{what} lasts {}, longer than the cap of {}", format_ttl(*length), format_ttl(*cap))]
    TooLong {
        what: String,
        length: Duration,
        cap: Duration,
    },
    #[error("{what} was granted after the window had already expired")]
    AfterExpiry { what: String },
}

/// Checks a window's grants, oldest first (the opening, then each
/// extension): each lasts at most `cap` from when it was granted, and an
/// extension is granted before the expiry it extends. So a window lives at
/// most `cap` past its last legitimate expiry, however its times were
/// written.
pub fn check_grants(grants: &[Grant], cap: Duration) -> Result<(), GrantError> {
    let what = |i: usize| match i {
        0 => "the opening".to_string(),
        n => format!("extension {n}"),
    };
    let mut expiry: Option<SystemTime> = None;
    for (i, grant) in grants.iter().enumerate() {
        if expiry.is_some_and(|expiry| grant.at > expiry) {
            return Err(GrantError::AfterExpiry { what: what(i) });
        }
        let length = grant.until.duration_since(grant.at).unwrap_or_default();
        if length > cap {
            return Err(GrantError::TooLong {
                what: what(i),
                length,
                cap,
            });
        }
        expiry = Some(grant.until);
    }
    Ok(())
}

/// Whether a group may not be named in a window: Kubernetes' own groups
/// (`system:masters`, `system:nodes`, `system:authenticated`, …) describe
/// no person on call and would make a window read as a cluster-admin's.
pub fn is_privileged_group(group: &str) -> bool {
    group.starts_with("system:")
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
        let huge = format!("{}d{}d", u64::MAX, u64::MAX);
        for text in ["", "0s", "2", "h", "2w", "-1h", &huge] {
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
        assert_eq!(new_fields(None, &first), first);
        assert!(new_fields(Some(&first), &first).is_empty());
        let second = [field("spec.replicas", json!(6))];
        assert_eq!(new_fields(Some(&first), &second), second);
    }

    #[test]
    fn a_second_change_to_an_object_records_only_the_field_that_changed() {
        let first = [field("spec.replicas", json!(5))];
        let both = [
            field("spec.replicas", json!(5)),
            field("spec.template.spec.containers[name=web].image", json!("x")),
        ];
        assert_eq!(new_fields(Some(&first), &both), both[1..]);
    }

    #[test]
    fn a_ttl_beyond_the_cap_is_refused_and_says_so() {
        assert_eq!(
            within_cap(Duration::from_secs(3600), DEFAULT_MAX_TTL),
            Ok(Duration::from_secs(3600))
        );
        let error = within_cap(Duration::from_secs(25 * 3600), DEFAULT_MAX_TTL).unwrap_err();
        assert_eq!(
            error.to_string(),
            "time to live 1d1h: longer than the cap of 1d (extend the window when it is about to expire)"
        );
        assert_eq!(format_ttl(Duration::from_secs(5400)), "1h30m");
    }

    #[test]
    fn each_grant_lasts_at_most_the_cap_and_extends_an_unexpired_window() {
        let cap = Duration::from_secs(3600);
        let grant = |from, until| Grant {
            at: at(from),
            until: at(until),
        };
        assert_eq!(
            check_grants(&[grant(0, 3600), grant(3500, 7100)], cap),
            Ok(())
        );
        assert!(matches!(
            check_grants(&[grant(0, 3601)], cap),
            Err(GrantError::TooLong { .. })
        ));
        // An extension dated after the expiry it extends was backdated or
        // post-dated by hand.
        assert_eq!(
            check_grants(&[grant(0, 3600), grant(3700, 4000)], cap)
                .unwrap_err()
                .to_string(),
            "extension 1 was granted after the window had already expired"
        );
        // The year 2999 is far beyond any cap.
        assert!(check_grants(&[grant(0, 32_000_000_000)], cap).is_err());
    }

    #[test]
    fn kubernetes_system_groups_are_privileged() {
        for group in ["system:masters", "system:authenticated", "system:nodes"] {
            assert!(is_privileged_group(group), "{group}");
        }
        assert!(!is_privileged_group("oncall"));
        assert!(!is_privileged_group("tether:break-glass"));
    }
}
