//! The API server, then etcd, really restart (the local control plane
//! stops each and starts it again on the same data) while a commit waits:
//! the controller resumes its watches without a relist storm, syncs the
//! commit once, records it once, and still heals drift afterwards. A test
//! binary of its own, since it restarts the control plane it runs on.

use tether_testkit::Component;
use tether_testkit::faults::{self, Outcome};

fn nothing_lost_nothing_twice(outcome: &Outcome) {
    outcome.assert_nothing_lost();
    assert_eq!(outcome.duplicates, 0, "{outcome:?}");
    // One relist per watch at most (Applications, windows, Projects,
    // Secrets, the Lease, each managed kind, audit records...), not a storm.
    assert!(
        outcome.lists_in_recovery <= 30,
        "a relist storm after the restart: {outcome:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn after_the_api_server_and_then_etcd_restart_the_commit_syncs_once_and_drift_is_still_healed()
 {
    // One after the other: both restart the one control plane.
    nothing_lost_nothing_twice(&faults::restart(Component::ApiServer).await);
    nothing_lost_nothing_twice(&faults::restart(Component::Etcd).await);
}
