//! `kill -9` of `tether run` at three moments of a 200-object sync (the
//! short form of `tether-bench --faults`' crash scenario,
//! `tether_testkit::faults::crash`): the controller started again brings
//! every object to the commit (none left at the one before), leaves no
//! operation at Running, records the sync in the history, and reports the
//! objects a killed sync left behind as Accidental drift.

use std::path::Path;

use tether_testkit::faults;

#[tokio::test]
async fn a_controller_killed_mid_sync_converges_every_object_to_the_commit_once_started_again() {
    let outcome = faults::crash(Path::new(env!("CARGO_BIN_EXE_tether")), 3).await;
    println!("{outcome:?}");
    assert!(outcome.converged, "{outcome:?}");
    assert_eq!(
        outcome.objects_lost, 0,
        "objects left at an older commit: {outcome:?}"
    );
    assert_eq!(
        outcome.records_lost, 0,
        "an operation stuck at Running or a sync missing from the history: {outcome:?}"
    );
    assert!(
        outcome.said_and_held,
        "a sync killed half-way not reported as Accidental drift: {outcome:?}"
    );
}
