//! The fault scenarios' short form (`tether-bench faults` runs them many
//! times and prints the table): a controller whose API traffic goes
//! through a fault proxy, or whose Git server goes down, recovers without
//! losing an object, deleting what it did not create, or forgetting a
//! synced revision.

use std::time::Duration;

use tether_testkit::faults::{self, Outcome};

fn nothing_lost(outcome: &Outcome) {
    outcome.assert_nothing_lost();
    assert!(outcome.said_and_held, "{outcome:?}");
}

#[tokio::test]
async fn a_429_storm_with_retry_after_is_honoured_and_the_commit_syncs_after_it() {
    let outcome = faults::throttle_storm(429, Some(2), Duration::from_secs(10)).await;
    nothing_lost(&outcome);
    assert!(
        outcome.rate_during_fault <= 10.0,
        "more than 10 requests/s against a server that asked to wait: {outcome:?}"
    );
}

#[tokio::test]
async fn a_503_storm_is_survived_and_the_commit_syncs_after_it() {
    let outcome = faults::throttle_storm(503, None, Duration::from_secs(10)).await;
    nothing_lost(&outcome);
}

#[tokio::test]
async fn after_the_api_server_is_gone_and_back_the_watches_resume_without_a_relist_storm() {
    let outcome = faults::api_outage(Duration::from_secs(10)).await;
    nothing_lost(&outcome);
    assert!(
        outcome.lists_in_recovery <= 30,
        "a relist storm after the outage: {outcome:?}"
    );
}

#[tokio::test]
async fn no_scale_is_missed_while_the_watch_streams_are_cut_every_few_seconds() {
    let outcome = faults::watch_cuts(Duration::from_secs(20), Duration::from_secs(3)).await;
    nothing_lost(&outcome);
}

#[tokio::test]
async fn while_the_git_server_is_down_the_last_good_state_holds_and_the_commit_syncs_once_it_is_back()
 {
    let outcome = faults::git_outage(Duration::from_secs(20)).await;
    nothing_lost(&outcome);
}
