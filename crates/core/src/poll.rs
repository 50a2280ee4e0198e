//! Polling: which repositories are due for a ref check, and how often.
//!
//! Every Application polls its repository at its `spec.source.interval`
//! (or the controller's default). Apps that share a repository share one
//! poll, at the shortest interval among them: a monorepo of 200 apps costs
//! one `ls-remote` per interval, not 200. The poll key (`K`) is whatever
//! makes two apps' polls interchangeable (the repository, and the
//! credentials it is read with).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::window::parse_ttl;

/// The shortest interval accepted, so a typo (`1s` for `1m`) cannot turn
/// the controller into a load generator against a Git server.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The default poll interval, as Argo CD's and Flux's (3 minutes).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(180);

/// Why a poll interval was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("interval {text:?}: {reason} (use e.g. 10s, 3m, 1h)")]
pub struct IntervalError {
    text: String,
    reason: &'static str,
}

/// Reads a poll interval: `10s`, `3m`, `1h30m` (units `d`, `h`, `m`, `s`).
pub fn parse_interval(text: &str) -> Result<Duration, IntervalError> {
    let error = |reason| IntervalError {
        text: text.to_string(),
        reason,
    };
    let interval = parse_ttl(text).map_err(|refused| error(refused.reason))?;
    if interval < MIN_INTERVAL {
        return Err(error("shorter than 1s"));
    }
    Ok(interval)
}

/// Each poll key's interval: the shortest interval among the apps
/// (`followers`) that poll it.
pub fn schedule<K: Ord>(
    followers: impl IntoIterator<Item = (K, Duration)>,
) -> BTreeMap<K, Duration> {
    let mut schedule = BTreeMap::new();
    for (key, interval) in followers {
        schedule
            .entry(key)
            .and_modify(|shortest: &mut Duration| *shortest = (*shortest).min(interval))
            .or_insert(interval);
    }
    schedule
}

/// The longest a failing repository waits between polls.
pub const MAX_FAILING_WAIT: Duration = Duration::from_secs(300);

/// How long after a failed poll the next one should wait beyond its
/// interval: none after a success, then the interval doubling per
/// consecutive failure (`interval × 2^failures` in all), up to
/// [`MAX_FAILING_WAIT`] (or the interval, if longer). A Git server that
/// is down is not asked again every interval by every controller; the
/// first poll after it is back finds the change.
pub fn failing_delay(interval: Duration, failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    let wait = crate::backoff::doubling(
        failures.saturating_add(1),
        interval,
        MAX_FAILING_WAIT.max(interval),
    );
    wait.saturating_sub(interval)
}

/// The keys of `schedule` due at `now`: never polled (not in `last`), or
/// last polled at least their interval ago.
pub fn due<'a, K: Ord>(
    schedule: &'a BTreeMap<K, Duration>,
    last: &BTreeMap<K, Instant>,
    now: Instant,
) -> Vec<&'a K> {
    schedule
        .iter()
        .filter(|(key, interval)| {
            last.get(key)
                .is_none_or(|polled| now.saturating_duration_since(*polled) >= **interval)
        })
        .map(|(key, _)| key)
        .collect()
}

/// When the next key of `schedule` falls due (`None` when nothing is
/// scheduled); a key never polled is due at once.
pub fn next_due<K: Ord>(
    schedule: &BTreeMap<K, Duration>,
    last: &BTreeMap<K, Instant>,
    now: Instant,
) -> Option<Instant> {
    schedule
        .iter()
        .map(|(key, interval)| last.get(key).map_or(now, |polled| *polled + *interval))
        .min()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failing_repository_is_polled_less_often_doubling_up_to_five_minutes() {
        let interval = Duration::from_secs(10);
        let waits: Vec<u64> = (0..8)
            .map(|failures| (interval + failing_delay(interval, failures)).as_secs())
            .collect();
        assert_eq!(waits, [10, 20, 40, 80, 160, 300, 300, 300]);
        let hourly = Duration::from_secs(3600);
        assert_eq!(failing_delay(hourly, 3), Duration::ZERO);
    }

    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn apps_on_one_repository_share_a_poll_at_their_shortest_interval() {
        let schedule = schedule([("shop", 180 * S), ("blog", 60 * S), ("shop", 10 * S)]);
        assert_eq!(schedule.len(), 2);
        assert_eq!(schedule["shop"], 10 * S);
        assert_eq!(schedule["blog"], 60 * S);
    }

    #[test]
    fn a_repository_never_polled_is_due_at_once() {
        let now = Instant::now();
        let schedule = schedule([("shop", 10 * S)]);
        assert_eq!(due(&schedule, &BTreeMap::new(), now), [&"shop"]);
        assert_eq!(next_due(&schedule, &BTreeMap::new(), now), Some(now));
    }

    #[test]
    fn a_repository_is_due_once_its_interval_has_passed() {
        let start = Instant::now();
        let schedule = schedule([("shop", 10 * S), ("blog", 60 * S)]);
        let last = BTreeMap::from([("shop", start), ("blog", start)]);
        assert!(due(&schedule, &last, start + 9 * S).is_empty());
        assert_eq!(due(&schedule, &last, start + 10 * S), [&"shop"]);
        assert_eq!(due(&schedule, &last, start + 60 * S), [&"blog", &"shop"]);
        assert_eq!(next_due(&schedule, &last, start), Some(start + 10 * S));
    }

    #[test]
    fn a_repository_nobody_follows_is_never_due() {
        let schedule: BTreeMap<&str, Duration> = schedule([]);
        let last = BTreeMap::from([("shop", Instant::now())]);
        assert!(due(&schedule, &last, Instant::now()).is_empty());
        assert_eq!(next_due(&schedule, &last, Instant::now()), None);
    }

    #[test]
    fn intervals_read_as_durations_and_nonsense_is_refused() {
        assert_eq!(parse_interval("10s").unwrap(), 10 * S);
        assert_eq!(parse_interval("3m").unwrap(), 180 * S);
        assert_eq!(parse_interval("1h30m").unwrap(), 5400 * S);
        for bad in ["", "0s", "10", "ten seconds", "5x"] {
            assert!(parse_interval(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
