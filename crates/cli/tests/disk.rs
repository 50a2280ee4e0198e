//! `tether run` with its cache on a small file system that fills up, then
//! one that turns read-only (tether_testkit::faults::disk; tether-bench
//! --faults runs them more often): the last good state holds, a condition
//! says what is wrong, and once the file system is writable again the new
//! commit syncs from a cache `git fsck` finds sound.

use std::path::Path;

use tether_testkit::faults::{self, DiskTrouble, Outcome};

fn said_held_and_recovered(outcome: &Outcome) {
    println!("{outcome:?}");
    assert!(outcome.said_and_held, "{outcome:?}");
    assert!(outcome.converged, "{outcome:?}");
    assert_eq!(outcome.objects_lost, 0, "{outcome:?}");
}

#[tokio::test]
async fn a_full_cache_file_system_keeps_the_last_good_state_says_so_and_recovers_when_freed() {
    let tether = Path::new(env!("CARGO_BIN_EXE_tether"));
    said_held_and_recovered(&faults::disk(tether, DiskTrouble::Full).await);
}

#[tokio::test]
async fn a_read_only_cache_keeps_the_last_good_state_says_so_and_recovers_when_writable() {
    let tether = Path::new(env!("CARGO_BIN_EXE_tether"));
    said_held_and_recovered(&faults::disk(tether, DiskTrouble::ReadOnly).await);
}
