//! Sync windows: inside a deny window a `kubectl scale` is recorded as
//! drift and left alone, and the condition `SyncWindow` says which window
//! and until when; once the window closes it is healed at once.

mod support;

use std::time::{Duration, Instant};
use tether_core::ConditionStatus;

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::{replicas, web_app};
use tether_controller::api::Application;
use tether_core::drift::DriftOutcome;
use tether_testkit::{assert_starts_with, condition, eventually, has_condition, status_where};

/// How long the deny window stays open after it is written.
const OPEN_FOR: i64 = 20;

#[tokio::test(flavor = "multi_thread")]
async fn a_deny_window_records_a_scale_without_healing_it_and_heals_it_when_it_closes() {
    let (ns, _repo, apps) = web_app("windows", json!({})).await;
    status_where(&apps, "shop synced", |s| s.sync.revision.is_some()).await;
    assert_eq!(replicas(&ns).await, 2);

    // A deny window that opened at the start of this minute and closes
    // OPEN_FOR seconds from now.
    let now = Timestamp::now();
    let utc = now.to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC);
    let schedule = format!("{} {} * * *", utc.minute(), utc.hour());
    let duration = i64::from(utc.second()) + OPEN_FOR;
    let closes = now + k8s_openapi::jiff::SignedDuration::from_secs(OPEN_FOR);
    let windows = json!({"spec": {"syncPolicy": {"syncWindows": [
        {"kind": "deny", "schedule": schedule, "duration": format!("{duration}s")}
    ]}}});
    apps.patch("shop", &PatchParams::default(), &Patch::Merge(&windows))
        .await
        .unwrap();
    let blocked = status_where(&apps, "the SyncWindow condition", |s| {
        has_condition(s, "SyncWindow", ConditionStatus::True)
    })
    .await;
    assert_starts_with(
        &condition(&blocked, "SyncWindow").unwrap().message,
        &format!(
            "deny window \"{schedule}\" for {duration}s (UTC) is open: no automated sync or self-heal until "
        ),
    );

    // Scaled by hand inside the window: recorded, not healed.
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=5"]);
    status_where(&apps, "the scale recorded as drift, not healed", |s| {
        s.drift.iter().any(|entry| {
            entry.record.object.name == "web" && entry.response == DriftOutcome::Reported
        })
    })
    .await;
    assert_eq!(replicas(&ns).await, 5, "healed inside a deny window");

    // The window closes: healed within 2 s.
    let wait = closes.duration_since(Timestamp::now());
    tokio::time::sleep(Duration::try_from(wait).unwrap_or_default()).await;
    let closed = Instant::now();
    eventually("healed after the window closed", || async {
        (replicas(&ns).await == 2).then_some(())
    })
    .await;
    let healed_in = closed.elapsed();
    println!("healed {healed_in:?} after the deny window closed");
    assert!(healed_in < Duration::from_secs(2), "{healed_in:?}");
    // The status is written after the heal, in the same pass: wait for it
    // rather than read it at once.
    let apps: Api<Application> = ns.api();
    status_where(&apps, "the SyncWindow condition closed", |s| {
        has_condition(s, "SyncWindow", ConditionStatus::False)
    })
    .await;
}
