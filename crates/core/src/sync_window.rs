//! Sync windows (as Argo CD's): times when automated syncs and self-heal
//! may run (`allow`) or may not (`deny`), each a cron schedule that opens
//! the window, a duration and a time zone.
//!
//! Inside a deny window — or outside every allow window when an app has
//! any — nothing is synced or reverted automatically: drift is still
//! recorded, and the NotSynced alert still counts. A window with
//! `manualSync` lets a `tether sync` through. Deny wins over allow.

use std::fmt;
use std::str::FromStr;

use croner::Cron;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};

/// Whether a window allows or denies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    Allow,
    Deny,
}

/// One window, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncWindow {
    pub kind: WindowKind,
    /// Cron (5 fields: minute hour day-of-month month day-of-week) of when
    /// the window opens.
    pub schedule: String,
    /// How long it stays open (`1h`, `90m`, `2h30m`, `PT1H`).
    pub duration: String,
    /// IANA time zone of the schedule (default UTC).
    pub time_zone: Option<String>,
    /// Whether a `tether sync` may run while this window blocks.
    pub manual_sync: bool,
}

/// A window as Applications and Projects write it (`kind: allow|deny`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowSpec {
    /// `allow` or `deny` (anything else is read as `deny`).
    pub kind: String,
    pub schedule: String,
    pub duration: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub manual_sync: bool,
}

impl WindowSpec {
    /// The window it describes.
    pub fn window(&self) -> SyncWindow {
        SyncWindow {
            kind: match self.kind.as_str() {
                "allow" => WindowKind::Allow,
                _ => WindowKind::Deny,
            },
            schedule: self.schedule.clone(),
            duration: self.duration.clone(),
            time_zone: self.time_zone.clone(),
            manual_sync: self.manual_sync,
        }
    }
}

/// Why a window cannot be used: the window (by its position) and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("syncWindows[{index}].{field}: {message}")]
pub struct WindowError {
    pub index: usize,
    pub field: &'static str,
    pub message: String,
}

/// What the windows say now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Automated syncs and self-heal may run.
    pub automated: bool,
    /// A `tether sync` may run.
    pub manual: bool,
    /// Why not, naming the window(s); empty when nothing is blocked.
    pub reason: String,
    /// When the block ends (or, when nothing is blocked, when the next
    /// deny window opens), to look again then.
    pub until: Option<Timestamp>,
}

struct Parsed {
    kind: WindowKind,
    cron: Cron,
    duration: SignedDuration,
    zone: TimeZone,
    manual_sync: bool,
    text: String,
}

impl Parsed {
    fn of(index: usize, window: &SyncWindow) -> Result<Parsed, WindowError> {
        let error = |field, message: String| WindowError {
            index,
            field,
            message,
        };
        let cron = Cron::from_str(&window.schedule).map_err(|e| {
            error(
                "schedule",
                format!("{:?} is not a cron schedule: {e}", window.schedule),
            )
        })?;
        let duration = SignedDuration::from_str(&window.duration).map_err(|e| {
            error(
                "duration",
                format!(
                    "{:?} is not a duration (e.g. 1h, 90m, 2h30m): {e}",
                    window.duration
                ),
            )
        })?;
        if duration <= SignedDuration::ZERO {
            return Err(error(
                "duration",
                format!("{:?} is not positive", window.duration),
            ));
        }
        let zone = match &window.time_zone {
            None => TimeZone::UTC,
            Some(name) => TimeZone::get(name).map_err(|e| {
                error(
                    "timeZone",
                    format!("{name:?} is not an IANA time zone: {e}"),
                )
            })?,
        };
        let kind = match window.kind {
            WindowKind::Allow => "allow",
            WindowKind::Deny => "deny",
        };
        let text = format!(
            "{kind} window {:?} for {} ({})",
            window.schedule,
            window.duration,
            window.time_zone.as_deref().unwrap_or("UTC")
        );
        Ok(Parsed {
            kind: window.kind,
            cron,
            duration,
            zone,
            manual_sync: window.manual_sync,
            text,
        })
    }

    /// When the window is open at `now`, when it closes.
    fn open_until(&self, now: &Zoned) -> Option<Timestamp> {
        let opened = self.cron.find_previous_occurrence(now, true).ok()?;
        let closes = opened.timestamp().checked_add(self.duration).ok()?;
        (now.timestamp() < closes).then_some(closes)
    }

    /// When the window next opens after `now`.
    fn next_opening(&self, now: &Zoned) -> Option<Timestamp> {
        let next = self.cron.find_next_occurrence(now, false).ok()?;
        Some(next.timestamp())
    }
}

/// What `windows` say at `now`.
pub fn judge(windows: &[SyncWindow], now: Timestamp) -> Result<Verdict, WindowError> {
    let parsed: Vec<Parsed> = windows
        .iter()
        .enumerate()
        .map(|(index, window)| Parsed::of(index, window))
        .collect::<Result<_, _>>()?;
    let at = |parsed: &Parsed| now.to_zoned(parsed.zone.clone());
    let open: Vec<(&Parsed, Timestamp)> = parsed
        .iter()
        .filter_map(|p| Some((p, p.open_until(&at(p))?)))
        .collect();
    let denying: Vec<&(&Parsed, Timestamp)> = open
        .iter()
        .filter(|(p, _)| p.kind == WindowKind::Deny)
        .collect();
    let allows: Vec<&Parsed> = parsed
        .iter()
        .filter(|p| p.kind == WindowKind::Allow)
        .collect();
    let allowing = open.iter().any(|(p, _)| p.kind == WindowKind::Allow);
    if !denying.is_empty() {
        let until = denying.iter().map(|(_, closes)| *closes).max();
        let names: Vec<&str> = denying.iter().map(|(p, _)| p.text.as_str()).collect();
        return Ok(Verdict {
            automated: false,
            manual: denying.iter().all(|(p, _)| p.manual_sync),
            reason: format!("{} is open", names.join(" and ")),
            until,
        });
    }
    if !allows.is_empty() && !allowing {
        let until = allows.iter().filter_map(|p| p.next_opening(&at(p))).min();
        let names: Vec<&str> = allows.iter().map(|p| p.text.as_str()).collect();
        return Ok(Verdict {
            automated: false,
            manual: allows.iter().any(|p| p.manual_sync),
            reason: format!("outside every allow window ({})", names.join(", ")),
            until,
        });
    }
    // Nothing blocks: look again when the next deny window opens, or when
    // the allow windows that are open close.
    let next_deny = parsed
        .iter()
        .filter(|p| p.kind == WindowKind::Deny)
        .filter_map(|p| p.next_opening(&at(p)));
    let allow_closes = open
        .iter()
        .filter(|(p, _)| p.kind == WindowKind::Allow)
        .map(|(_, closes)| *closes);
    Ok(Verdict {
        automated: true,
        manual: true,
        reason: String::new(),
        until: next_deny.chain(allow_closes).min(),
    })
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.until, self.automated) {
            (_, true) => write!(f, "no sync window blocks"),
            (Some(until), false) => write!(
                f,
                "{}: no automated sync or self-heal until {until}{}",
                self.reason,
                if self.manual {
                    "; tether sync may run"
                } else {
                    ""
                }
            ),
            (None, false) => write!(f, "{}: no automated sync or self-heal", self.reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(kind: WindowKind, schedule: &str, duration: &str, zone: Option<&str>) -> SyncWindow {
        SyncWindow {
            kind,
            schedule: schedule.into(),
            duration: duration.into(),
            time_zone: zone.map(str::to_string),
            manual_sync: false,
        }
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    /// Asserts that `judge` refuses `windows` with an error starting with `start`.
    fn assert_refused(windows: &[SyncWindow], start: &str) {
        let error = judge(windows, at("2026-12-05T12:00:00Z")).unwrap_err();
        assert!(error.to_string().starts_with(start), "{error}");
    }

    #[test]
    fn a_friday_evening_freeze_blocks_until_monday_morning_in_its_time_zone() {
        // Fridays 18:00 in Berlin, for 62 hours: until Monday 08:00.
        let freeze = [window(
            WindowKind::Deny,
            "0 18 * * 5",
            "62h",
            Some("Europe/Berlin"),
        )];
        // Friday 2026-12-04 19:30 in Berlin is 18:30 UTC.
        let verdict = judge(&freeze, at("2026-12-04T18:30:00Z")).unwrap();
        assert!(!verdict.automated && !verdict.manual);
        assert_eq!(verdict.until, Some(at("2026-12-07T07:00:00Z")));
        assert_eq!(
            verdict.to_string(),
            "deny window \"0 18 * * 5\" for 62h (Europe/Berlin) is open: no automated sync or self-heal until 2026-12-07T07:00:00Z"
        );
        // Thursday: open for business, look again when the freeze starts.
        let verdict = judge(&freeze, at("2026-12-03T12:00:00Z")).unwrap();
        assert!(verdict.automated);
        assert_eq!(verdict.until, Some(at("2026-12-04T17:00:00Z")));
    }

    #[test]
    fn outside_every_allow_window_only_manual_syncs_may_run_if_a_window_says_so() {
        let mut business = window(WindowKind::Allow, "0 9 * * 1-5", "8h", None);
        business.manual_sync = true;
        let verdict = judge(&[business.clone()], at("2026-12-05T12:00:00Z")).unwrap();
        assert!(!verdict.automated && verdict.manual);
        assert_eq!(verdict.until, Some(at("2026-12-07T09:00:00Z")));
        let verdict = judge(&[business], at("2026-12-07T10:00:00Z")).unwrap();
        assert!(verdict.automated);
    }

    #[test]
    fn deny_wins_over_allow_and_a_manual_deny_window_lets_tether_sync_through() {
        let allow = window(WindowKind::Allow, "* * * * *", "1h", None);
        let mut deny = window(WindowKind::Deny, "0 12 * * *", "30m", None);
        deny.manual_sync = true;
        let verdict = judge(&[allow, deny], at("2026-12-05T12:10:00Z")).unwrap();
        assert!(!verdict.automated && verdict.manual);
        assert_eq!(verdict.until, Some(at("2026-12-05T12:30:00Z")));
    }

    #[test]
    fn a_bad_window_is_refused_naming_its_place_and_field() {
        let bad = [
            window(WindowKind::Deny, "0 18 * * 5", "1h", None),
            window(WindowKind::Deny, "every friday", "1h", None),
        ];
        assert_refused(&bad, "syncWindows[1].schedule: \"every friday\"");
        let zone = window(WindowKind::Deny, "0 18 * * 5", "1h", Some("Mars/Olympus"));
        assert_refused(&[zone], "syncWindows[0].timeZone");
        let duration = window(WindowKind::Deny, "0 18 * * 5", "soon", None);
        assert_refused(&[duration], "syncWindows[0].duration");
    }

    #[test]
    fn a_window_closes_when_its_duration_is_over_even_within_the_minute_it_opened() {
        let deny = [window(WindowKind::Deny, "12 12 * * *", "48s", None)];
        assert!(!judge(&deny, at("2026-12-05T12:12:30Z")).unwrap().automated);
        let after = judge(&deny, at("2026-12-05T12:12:50Z")).unwrap();
        assert!(after.automated, "{after:?}");
    }
}
