//! Product rule 5: an Application NotSynced for an hour is one whose
//! desired state has drifted from its observed state. Since when an app has
//! not been Synced, and whether that has lasted too long — computed from
//! the status alone, so a restarted controller picks up where it was.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// How long an app may stay not Synced before the alert, unless its
/// `spec.syncPolicy.alertNotSyncedAfter` or `tether run
/// --alert-not-synced-after` says otherwise.
pub const DEFAULT_THRESHOLD: Duration = Duration::from_secs(3600);

/// Since when an app has not been Synced: kept from before while it still
/// is not, `now` when it just stopped being Synced, none once Synced.
pub fn not_synced_since(previous: Option<&str>, synced: bool, now: &str) -> Option<String> {
    match (synced, previous) {
        (true, _) => None,
        (false, Some(since)) if instant(since).is_some() => Some(since.to_string()),
        (false, _) => Some(now.to_string()),
    }
}

/// How long from `since` to `now` (zero when either is unreadable or
/// `since` lies ahead, e.g. another replica's clock).
pub fn elapsed(since: &str, now: &str) -> Duration {
    match (instant(since), instant(now)) {
        (Some(since), Some(now)) => (now - since).to_std().unwrap_or_default(),
        _ => Duration::ZERO,
    }
}

/// Whether an app not Synced since `since` has been so for longer than
/// `threshold` at `now`.
pub fn too_long(since: Option<&str>, now: &str, threshold: Duration) -> bool {
    since.is_some_and(|since| elapsed(since, now) > threshold)
}

/// How long from `now` until an app not Synced since `since` is too long;
/// none when it is Synced or already is.
pub fn due_in(since: Option<&str>, now: &str, threshold: Duration) -> Option<Duration> {
    let spent = elapsed(since?, now);
    (spent <= threshold).then(|| threshold - spent)
}

/// A span as people read it: `45s`, `12m30s`, `1h02m`, `3d04h`.
pub fn span(duration: Duration) -> String {
    let seconds = duration.as_secs();
    let (d, h, m, s) = (
        seconds / 86_400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) if s == 0 => format!("{m}m"),
        (0, 0, _) => format!("{m}m{s:02}s"),
        (0, _, 0) if s == 0 => format!("{h}h"),
        (0, _, _) => format!("{h}h{m:02}m"),
        (_, 0, 0) => format!("{d}d"),
        _ => format!("{d}d{h:02}h"),
    }
}

fn instant(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2026-12-03T10:00:00Z";
    const T1: &str = "2026-12-03T11:02:00Z";

    #[test]
    fn the_spell_starts_when_the_app_stops_being_synced_and_ends_when_it_is_again() {
        assert_eq!(not_synced_since(None, false, T0).as_deref(), Some(T0));
        assert_eq!(not_synced_since(Some(T0), false, T1).as_deref(), Some(T0));
        assert_eq!(not_synced_since(Some(T0), true, T1), None);
        // An unreadable start restarts the spell rather than poisoning it.
        assert_eq!(
            not_synced_since(Some("yesterday"), false, T1).as_deref(),
            Some(T1)
        );
    }

    #[test]
    fn too_long_means_strictly_longer_than_the_threshold() {
        let hour = Duration::from_secs(3600);
        assert!(too_long(Some(T0), T1, hour));
        assert!(!too_long(Some(T0), T1, Duration::from_secs(3720)));
        assert!(!too_long(None, T1, hour));
        assert!(
            !too_long(Some(T1), T0, Duration::ZERO),
            "a clock behind is not overdue"
        );
    }

    #[test]
    fn the_alert_is_due_when_the_threshold_runs_out() {
        let hour = Duration::from_secs(3600);
        assert_eq!(due_in(Some(T0), T0, hour), Some(hour));
        assert_eq!(due_in(Some(T0), T1, hour), None);
        assert_eq!(due_in(None, T1, hour), None);
    }

    #[test]
    fn spans_read_as_people_write_them() {
        let s = Duration::from_secs;
        assert_eq!(span(s(45)), "45s");
        assert_eq!(span(s(300)), "5m");
        assert_eq!(span(s(750)), "12m30s");
        assert_eq!(span(s(3720)), "1h02m");
        assert_eq!(span(s(3600)), "1h");
        assert_eq!(span(s(86_400)), "1d");
        assert_eq!(span(s(273_600)), "3d04h");
    }
}
