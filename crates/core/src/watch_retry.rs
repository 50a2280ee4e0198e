//! When a watch that failed tries again.
//!
//! An API server that answered with an error (429, 5xx, a watch it
//! refused) is struggling or saying no: the watch waits as client-go's
//! reflector does, 0.8 s doubling up to 30 s, plus up to as much again at
//! random, so that many controllers do not make it worse together. One
//! that did not answer at all (connection refused or cut, or a gateway in
//! front of it saying 502 or 504: a restart, or the network in between)
//! costs nothing to ask again: the watch waits
//! 0.5 s doubling up to 4 s, plus up to a quarter more. With only the
//! first schedule, watches came back up to 40 s after an API server that
//! was down 12 s, and drift made meanwhile waited as long to be healed.
//!
//! Each kind of failure counts its own attempts, so the refused
//! connections of a restart do not lengthen the wait after one 503 while
//! the server starts; a watch event of any kind starts both afresh.

use std::time::Duration;

use crate::backoff::doubling;

/// How a watch failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFailure {
    /// The API server answered with an error.
    Answered,
    /// No answer: the connection was refused, reset or cut, or a gateway
    /// in front of the API server said it got none (502, 504).
    Unanswered,
}

/// The consecutive failures of one watch, by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchRetry {
    answered: u32,
    unanswered: u32,
}

impl WatchRetry {
    /// Counts a failure and says how long to wait before the next try.
    /// `jitter` is a number in [0, 1), at random.
    pub fn failed(&mut self, failure: WatchFailure, jitter: f64) -> Duration {
        let (attempts, first, ceiling, spread) = match failure {
            WatchFailure::Answered => (&mut self.answered, 800, 30_000, 1.0),
            WatchFailure::Unanswered => (&mut self.unanswered, 500, 4_000, 0.25),
        };
        *attempts = attempts.saturating_add(1);
        let wait = doubling(
            *attempts,
            Duration::from_millis(first),
            Duration::from_millis(ceiling),
        );
        wait.mul_f64(1.0 + spread * jitter.clamp(0.0, 1.0))
    }

    /// The watch delivered an event: the next failure waits the least.
    pub fn succeeded(&mut self) {
        *self = WatchRetry::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waits(retry: &mut WatchRetry, failure: WatchFailure, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| retry.failed(failure, 0.0).as_millis() as u64)
            .collect()
    }

    #[test]
    fn an_answered_failure_waits_as_client_go_does_doubling_up_to_thirty_seconds() {
        let mut retry = WatchRetry::default();
        assert_eq!(
            waits(&mut retry, WatchFailure::Answered, 8),
            [800, 1_600, 3_200, 6_400, 12_800, 25_600, 30_000, 30_000]
        );
    }

    #[test]
    fn an_unanswered_failure_waits_at_most_four_seconds() {
        let mut retry = WatchRetry::default();
        assert_eq!(
            waits(&mut retry, WatchFailure::Unanswered, 6),
            [500, 1_000, 2_000, 4_000, 4_000, 4_000]
        );
        assert_eq!(
            waits(&mut retry, WatchFailure::Unanswered, 100).last(),
            Some(&4_000)
        );
    }

    #[test]
    fn refused_connections_during_a_restart_do_not_lengthen_the_wait_after_an_answer() {
        let mut retry = WatchRetry::default();
        waits(&mut retry, WatchFailure::Unanswered, 10);
        assert_eq!(waits(&mut retry, WatchFailure::Answered, 1), [800]);
    }

    #[test]
    fn an_event_starts_both_counts_afresh() {
        let mut retry = WatchRetry::default();
        waits(&mut retry, WatchFailure::Answered, 5);
        waits(&mut retry, WatchFailure::Unanswered, 5);
        retry.succeeded();
        assert_eq!(waits(&mut retry, WatchFailure::Answered, 1), [800]);
        assert_eq!(waits(&mut retry, WatchFailure::Unanswered, 1), [500]);
    }

    #[test]
    fn jitter_adds_up_to_the_wait_again_after_an_answer_and_a_quarter_without() {
        let mut answered = WatchRetry::default();
        assert_eq!(
            answered.failed(WatchFailure::Answered, 0.5),
            Duration::from_millis(1_200)
        );
        let mut unanswered = WatchRetry::default();
        assert_eq!(
            unanswered.failed(WatchFailure::Unanswered, 0.8),
            Duration::from_millis(600)
        );
    }
}
