//! Replayed webhooks: a verified push seen again — the sender's retry, a
//! redelivery, or a captured request sent again by someone who cannot sign
//! one — triggers nothing. A push is known by its delivery id and by
//! (repository, ref, before, after): a replay carries the same signature,
//! so both match; a push of the same commit after a force push elsewhere
//! has another `before` and still counts.
//!
//! The memory is bounded: the most recent [`CAPACITY`] keys, none older
//! than [`TTL`]. A replay older than that wakes the apps once more, which
//! costs no more than a poll (the fetch decides what changed).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use tether_source::git::repo_key;
use tether_source::webhook::Push;

/// Keys remembered at most…
pub const CAPACITY: usize = 1_000;
/// …each for at most this long.
pub const TTL: Duration = Duration::from_secs(3600);

/// The recent deliveries.
#[derive(Debug)]
pub struct Deliveries {
    capacity: usize,
    ttl: Duration,
    seen: HashMap<String, Instant>,
    order: VecDeque<(String, Instant)>,
}

impl Default for Deliveries {
    fn default() -> Self {
        Deliveries::new(CAPACITY, TTL)
    }
}

impl Deliveries {
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Deliveries {
            capacity,
            ttl,
            seen: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Whether `push`, arriving at `now`, was seen before: `Some(what)`
    /// names the key that matched and nothing is recorded; `None` records
    /// the push.
    pub fn replayed(&mut self, push: &Push, now: Instant) -> Option<String> {
        self.forget_before(now);
        let keys = keys(push);
        if let Some(key) = keys.iter().find(|key| self.seen.contains_key(*key)) {
            return Some(key.clone());
        }
        for key in keys {
            self.seen.insert(key.clone(), now);
            self.order.push_back((key, now));
        }
        while self.order.len() > self.capacity {
            if let Some((key, _)) = self.order.pop_front() {
                self.seen.remove(&key);
            }
        }
        None
    }

    fn forget_before(&mut self, now: Instant) {
        while let Some((key, at)) = self.order.front() {
            if now.saturating_duration_since(*at) < self.ttl {
                break;
            }
            self.seen.remove(key);
            self.order.pop_front();
        }
    }
}

/// `delivery <id>` and `push <repository> <ref> <before>..<after>`.
fn keys(push: &Push) -> Vec<String> {
    let mut keys = Vec::new();
    if let Some(id) = &push.delivery {
        keys.push(format!("delivery {id}"));
    }
    if let (Some(url), Some(after)) = (push.repo_urls.first(), &push.after) {
        keys.push(format!(
            "push {} {} {}..{after}",
            repo_key(url),
            push.git_ref,
            push.before.as_deref().unwrap_or_default()
        ));
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(delivery: Option<&str>, before: &str, after: &str) -> Push {
        Push {
            repo_urls: vec!["https://git.example.com/shop/site.git".into()],
            git_ref: "refs/heads/main".into(),
            changed_paths: None,
            delivery: delivery.map(str::to_string),
            before: Some(before.into()),
            after: Some(after.into()),
        }
    }

    #[test]
    fn a_delivery_or_a_push_seen_before_is_a_replay() {
        let mut deliveries = Deliveries::default();
        let now = Instant::now();
        assert_eq!(deliveries.replayed(&push(Some("d1"), "a", "b"), now), None);
        assert_eq!(
            deliveries.replayed(&push(Some("d1"), "a", "b"), now),
            Some("delivery d1".into())
        );
        // The same push under another delivery id.
        let replay = deliveries.replayed(&push(Some("d2"), "a", "b"), now);
        assert!(
            replay.as_deref().is_some_and(
                |key| key.starts_with("push ") && key.ends_with(" refs/heads/main a..b")
            ),
            "{replay:?}"
        );
        // The same commit again after the branch moved elsewhere is new.
        assert_eq!(deliveries.replayed(&push(Some("d3"), "c", "b"), now), None);
    }

    #[test]
    fn the_memory_is_bounded_in_size_and_time() {
        let mut deliveries = Deliveries::new(2, Duration::from_secs(60));
        let now = Instant::now();
        for id in ["d1", "d2"] {
            assert_eq!(deliveries.replayed(&push(Some(id), id, id), now), None);
        }
        // Four keys for a capacity of two: d1's are gone.
        assert_eq!(
            deliveries.replayed(&push(Some("d1"), "d1", "d1"), now),
            None
        );
        let later = now + Duration::from_secs(61);
        assert_eq!(
            deliveries.replayed(&push(Some("d1"), "d1", "d1"), later),
            None
        );
        assert!(deliveries.order.len() <= 2);
    }
}
