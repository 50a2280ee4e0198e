//! Waits that double after each failed attempt, up to a ceiling.

use std::time::Duration;

/// `first · 2^(attempts-1)`, at most `ceiling` (`first` for attempt 0 or 1).
pub fn doubling(attempts: u32, first: Duration, ceiling: Duration) -> Duration {
    let factor = 1u32
        .checked_shl(attempts.saturating_sub(1))
        .unwrap_or(u32::MAX);
    first.saturating_mul(factor).min(ceiling)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_from_the_first_up_to_the_ceiling_and_never_overflows() {
        let (first, ceiling) = (Duration::from_secs(5), Duration::from_secs(60));
        let waits: Vec<u64> = (0..=6)
            .map(|a| doubling(a, first, ceiling).as_secs())
            .collect();
        assert_eq!(waits, [5, 5, 10, 20, 40, 60, 60]);
        assert_eq!(doubling(u32::MAX, first, ceiling), ceiling);
    }
}
