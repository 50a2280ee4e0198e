//! When to try a notification again: what an answer means (delivered,
//! worth another try, or refused for good) and the back-off between tries.

use std::time::Duration;

use tether_core::backoff::doubling;

/// How a message is tried. The default: 5 tries, 8 s after the first,
/// then 16, 32 and 64 s (120 s in all), each request given 10 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in all, the first included (at least 1).
    pub tries: u32,
    /// The wait after the first failed try; each later wait doubles.
    pub first_delay: Duration,
    /// How long one request may take before it counts as failed (and is
    /// retried).
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            tries: 5,
            first_delay: Duration::from_secs(8),
            timeout: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The wait after failed try `tried` (from 1) before the next, or
    /// `None` when that was the last.
    pub fn delay_after(&self, tried: u32) -> Option<Duration> {
        (tried < self.tries).then(|| doubling(tried, self.first_delay, Duration::MAX))
    }

    /// Every wait between tries, in order.
    pub fn schedule(&self) -> Vec<Duration> {
        (1..self.tries)
            .map_while(|tried| self.delay_after(tried))
            .collect()
    }
}

/// What a try came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Delivered,
    /// Failed, and may work later (5xx, 429, a timeout, no connection).
    Retry(String),
    /// Failed, and will fail again as sent (any other 4xx, a redirect, a
    /// missing Secret).
    Refused(String),
}

/// The verdict on an HTTP answer with `status`.
pub fn judge(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Delivered,
        429 | 500..=599 => Verdict::Retry(format!("HTTP {status}")),
        _ => Verdict::Refused(format!("HTTP {status}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_tries_five_times_over_two_minutes() {
        let policy = RetryPolicy::default();
        let seconds: Vec<u64> = policy.schedule().iter().map(Duration::as_secs).collect();
        assert_eq!(seconds, [8, 16, 32, 64]);
        assert_eq!(seconds.iter().sum::<u64>(), 120);
        assert_eq!(policy.delay_after(5), None);
        assert_eq!(policy.timeout, Duration::from_secs(10));
    }

    #[test]
    fn a_short_base_scales_the_whole_schedule() {
        let policy = RetryPolicy {
            tries: 3,
            first_delay: Duration::from_millis(50),
            ..RetryPolicy::default()
        };
        assert_eq!(
            policy.schedule(),
            [Duration::from_millis(50), Duration::from_millis(100)]
        );
        let once = RetryPolicy {
            tries: 1,
            ..RetryPolicy::default()
        };
        assert!(once.schedule().is_empty());
    }

    #[test]
    fn server_errors_and_too_many_requests_are_retried_other_refusals_not() {
        let cases = [
            (200, "delivered"),
            (204, "delivered"),
            (301, "refused"),
            (400, "refused"),
            (401, "refused"),
            (404, "refused"),
            (429, "retry"),
            (500, "retry"),
            (503, "retry"),
        ];
        for (status, expected) in cases {
            let verdict = match judge(status) {
                Verdict::Delivered => "delivered",
                Verdict::Retry(_) => "retry",
                Verdict::Refused(_) => "refused",
            };
            assert_eq!(verdict, expected, "HTTP {status}");
        }
    }
}
