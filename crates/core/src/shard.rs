//! Sharding Applications across controller replicas: which shard an app
//! belongs to, and which shards each live replica should hold.
//!
//! An app's shard is a jump consistent hash (Lamping & Veach, 2014) of its
//! `namespace/name`: every app maps to one of `N` shards, evenly, and going
//! from `N` to `N + 1` shards moves only the ~1/(N+1) of apps that land in
//! the new shard. Shards are spread over replicas by [`plan`], which keeps
//! every shard where it is unless its holder is gone or holds more than its
//! share, so a replica joining or leaving moves the fewest shards.
//!
//! Pure: the controller reads the shard Leases and the replicas' heartbeat
//! Leases, asks [`plan`] what this replica should hold, and acquires or
//! gives back Leases accordingly.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

/// A shard's index, `0..N`.
pub type Shard = u32;

/// The shard (`0..shards`) of the app `namespace/name`; 0 when there is
/// at most one shard.
pub fn shard_of(namespace: &str, name: &str, shards: u32) -> Shard {
    jump(stable_hash(&[namespace, "/", name]), shards)
}

/// The name of shard `shard`'s Lease.
pub fn lease_name(shard: Shard) -> String {
    format!("tether-shard-{shard}")
}

/// The shard a Lease named `name` stands for, if it is a shard Lease.
pub fn shard_of_lease(name: &str) -> Option<Shard> {
    name.strip_prefix("tether-shard-")?.parse().ok()
}

/// Which shards each live replica should hold, given who holds what now.
///
/// Every replica gets `shards / replicas` shards, and `shards % replicas`
/// of them one more (those holding the most now, so fewer shards move). A
/// replica keeps the shards it holds up to its share; shards held by no
/// live replica, or given up by one above its share, go to the replicas
/// furthest below their share (ties broken by a rendezvous hash of shard
/// and replica, so every replica computes the same plan from the same
/// view). Holders that are not in `live` count as gone. Every live replica
/// appears in the result, possibly with no shards.
pub fn plan(
    shards: u32,
    live: &BTreeSet<String>,
    holders: &BTreeMap<Shard, String>,
) -> BTreeMap<String, BTreeSet<Shard>> {
    let mut plan: BTreeMap<String, BTreeSet<Shard>> =
        live.iter().map(|r| (r.clone(), BTreeSet::new())).collect();
    if live.is_empty() {
        return plan;
    }
    // What each live replica holds now, best-scored first.
    let mut held: BTreeMap<&str, Vec<Shard>> = live.iter().map(|r| (r.as_str(), vec![])).collect();
    for (&shard, holder) in holders.iter().filter(|(s, _)| **s < shards) {
        if let Some(list) = held.get_mut(holder.as_str()) {
            list.push(shard);
        }
    }
    for (replica, list) in &mut held {
        list.sort_by_key(|&shard| std::cmp::Reverse(score(shard, replica)));
    }
    // Shares: the replicas holding the most get the remainder.
    let count = live.len() as u32;
    let (base, extra) = (shards / count, shards % count);
    let mut by_holdings: Vec<&str> = live.iter().map(String::as_str).collect();
    by_holdings.sort_by_key(|r| (std::cmp::Reverse(held[r].len()), *r));
    let share: BTreeMap<&str, u32> = by_holdings
        .iter()
        .enumerate()
        .map(|(i, r)| (*r, base + u32::from((i as u32) < extra)))
        .collect();
    // Keep what is held, up to the share.
    for (replica, list) in &held {
        let keep = list.iter().take(share[replica] as usize);
        plan.get_mut(*replica).expect("live").extend(keep);
    }
    // The rest go to whoever is furthest below their share.
    let placed: BTreeSet<Shard> = plan.values().flatten().copied().collect();
    for shard in (0..shards).filter(|s| !placed.contains(s)) {
        let replica = live
            .iter()
            .max_by_key(|r| {
                let missing = share[r.as_str()] as i64 - plan[r.as_str()].len() as i64;
                (missing, score(shard, r))
            })
            .expect("some live replica");
        plan.get_mut(replica).expect("live").insert(shard);
    }
    plan
}

/// The rendezvous score of `shard` on `replica`: the highest wins a tie.
fn score(shard: Shard, replica: &str) -> u64 {
    stable_hash(&[&shard.to_string(), "@", replica])
}

/// A hash that is the same on every replica, build and platform (the
/// standard library's is not promised to be): the first 8 bytes of SHA-256.
fn stable_hash(parts: &[&str]) -> u64 {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// Jump consistent hash: the bucket (`0..buckets`) of `key`.
fn jump(mut key: u64, buckets: u32) -> Shard {
    let (mut bucket, mut next) = (-1i64, 0i64);
    while next < i64::from(buckets) {
        bucket = next;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        next = ((bucket + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    bucket.max(0) as Shard
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apps(count: usize) -> Vec<(String, String)> {
        (0..count)
            .map(|i| (format!("team-{}", i % 7), format!("app-{i}")))
            .collect()
    }

    fn live(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn holders(pairs: &[(Shard, &str)]) -> BTreeMap<Shard, String> {
        pairs.iter().map(|(s, r)| (*s, r.to_string())).collect()
    }

    fn shards_of(plan: &BTreeMap<String, BTreeSet<Shard>>, replica: &str) -> Vec<Shard> {
        plan[replica].iter().copied().collect()
    }

    #[test]
    fn an_app_always_lands_in_the_same_shard() {
        assert_eq!(shard_of("shop", "web", 3), shard_of("shop", "web", 3));
        // Pinned: a change of hash would move every app on upgrade.
        let pinned: Vec<Shard> = apps(8)
            .iter()
            .map(|(ns, name)| shard_of(ns, name, 5))
            .collect();
        assert_eq!(pinned, PINNED);
        assert_eq!(shard_of("shop", "web", 1), 0);
        assert_eq!(shard_of("shop", "web", 0), 0);
    }

    const PINNED: [Shard; 8] = [0, 0, 3, 0, 3, 0, 4, 1];

    #[test]
    fn namespace_and_name_are_not_confused() {
        let moved = (0..200)
            .filter(|i| shard_of(&format!("a{i}"), "b", 16) != shard_of("a", &format!("{i}b"), 16))
            .count();
        assert!(moved > 150, "only {moved} of 200 differ");
    }

    #[test]
    fn apps_spread_evenly_over_shards() {
        let apps = apps(10_000);
        for shards in [2u32, 3, 5, 10] {
            let mut counts = vec![0usize; shards as usize];
            for (ns, name) in &apps {
                counts[shard_of(ns, name, shards) as usize] += 1;
            }
            // Within four standard deviations of an even split.
            let even = apps.len() as f64 / f64::from(shards);
            for count in &counts {
                let off = (*count as f64 - even).abs();
                assert!(off < 4.0 * even.sqrt(), "{shards} shards: {counts:?}");
            }
        }
    }

    #[test]
    fn adding_a_shard_moves_only_the_apps_that_land_in_it() {
        let apps = apps(10_000);
        for shards in [1u32, 3, 5, 9] {
            let mut moved = 0;
            for (ns, name) in &apps {
                let (before, after) = (shard_of(ns, name, shards), shard_of(ns, name, shards + 1));
                if before != after {
                    assert_eq!(after, shards, "an app moved between old shards");
                    moved += 1;
                }
            }
            let expected = apps.len() as f64 / f64::from(shards + 1);
            let off = (moved as f64 - expected).abs() / expected;
            assert!(off < 0.08, "{shards}→{}: moved {moved}", shards + 1);
        }
    }

    #[test]
    fn shard_leases_are_named_by_index() {
        assert_eq!(lease_name(2), "tether-shard-2");
        assert_eq!(shard_of_lease("tether-shard-2"), Some(2));
        assert_eq!(shard_of_lease("tether-controller"), None);
        assert_eq!(shard_of_lease("tether-shard-x"), None);
    }

    #[test]
    fn replicas_starting_together_get_one_shard_each() {
        let plan = plan(3, &live(&["a", "b", "c"]), &BTreeMap::new());
        assert!(plan.values().all(|s| s.len() == 1), "{plan:?}");
        let all: BTreeSet<Shard> = plan.values().flatten().copied().collect();
        assert_eq!(all, BTreeSet::from([0, 1, 2]));
    }

    #[test]
    fn every_replica_computes_the_same_plan_from_the_same_view() {
        let view = holders(&[(0, "b"), (4, "gone")]);
        let first = plan(6, &live(&["a", "b", "c"]), &view);
        let again = plan(6, &live(&["c", "b", "a"]), &view);
        assert_eq!(first, again);
    }

    #[test]
    fn a_lone_replica_holds_every_shard() {
        let plan = plan(3, &live(&["a"]), &holders(&[(1, "gone")]));
        assert_eq!(shards_of(&plan, "a"), vec![0, 1, 2]);
    }

    #[test]
    fn a_dead_replicas_shards_go_to_the_others_and_nothing_else_moves() {
        let before = holders(&[(0, "a"), (1, "b"), (2, "c"), (3, "a"), (4, "b"), (5, "c")]);
        let plan = plan(6, &live(&["a", "b"]), &before);
        assert_eq!(plan["a"].len() + plan["b"].len(), 6);
        assert_eq!(plan["a"].len(), 3, "{plan:?}");
        for (shard, holder) in &before {
            if holder != "c" {
                assert!(
                    plan[holder].contains(shard),
                    "shard {shard} moved off {holder}"
                );
            }
        }
    }

    #[test]
    fn a_joining_replica_takes_only_its_share_from_the_fullest() {
        let before = holders(&[(0, "a"), (1, "a"), (2, "b")]);
        let plan = plan(3, &live(&["a", "b", "c"]), &before);
        assert_eq!(plan["c"].len(), 1, "{plan:?}");
        assert_eq!(shards_of(&plan, "b"), vec![2]);
        assert_eq!(plan["a"].len(), 1);
        let taken = *plan["c"].first().unwrap();
        assert!([0, 1].contains(&taken));
    }

    #[test]
    fn an_uneven_count_gives_the_remainder_to_those_holding_more() {
        let before = holders(&[(0, "a"), (1, "a"), (2, "b"), (3, "b")]);
        let plan = plan(4, &live(&["a", "b", "c"]), &before);
        let sizes: Vec<usize> = plan.values().map(BTreeSet::len).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 4);
        assert_eq!(plan["c"].len(), 1, "{plan:?}");
        // One of a and b keeps both; only one shard moves.
        let kept = before.iter().filter(|(s, r)| plan[*r].contains(s)).count();
        assert_eq!(kept, 3);
    }

    #[test]
    fn shards_beyond_the_count_are_ignored() {
        let plan = plan(2, &live(&["a"]), &holders(&[(5, "a")]));
        assert_eq!(shards_of(&plan, "a"), vec![0, 1]);
    }

    #[test]
    fn no_live_replica_means_an_empty_plan() {
        assert!(plan(3, &BTreeSet::new(), &holders(&[(0, "a")])).is_empty());
    }
}
