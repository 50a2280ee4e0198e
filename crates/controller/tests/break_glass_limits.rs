//! Break-glass windows past their limits, as the security review (issue
//! 12) wrote them, against a real kube-apiserver: a window until the year
//! 2999, an extension far beyond the cap, and a window claiming
//! Kubernetes' `system:masters` group.

mod support;

use std::time::{Duration, SystemTime};

use kube::ResourceExt;
use serde_json::json;
use support::break_glass::{opening, refused, setup, window_where};
use tether_controller::api::break_glass::{Resolution, format_time};
use tether_controller::break_glass::request::{self, RequestError};
use tether_core::window::DEFAULT_MAX_TTL;
use tether_testkit::eventually;

#[tokio::test]
async fn a_window_longer_than_the_cap_is_refused() {
    // The controller here honours at most 1 h; the cluster's policy 24 h.
    let setup = setup("bga-cap", Duration::from_secs(3600)).await;
    let ns = &setup.ns;
    // Asked for through Tether: refused before anything is written.
    let error = request::open(&ns.client, opening(ns, &[], Duration::from_secs(25 * 3600)))
        .await
        .unwrap_err();
    assert!(matches!(error, RequestError::TooLong(_)), "{error}");
    assert_eq!(
        error.to_string(),
        "time to live 1d1h: longer than the cap of 1d (extend the window when it is about to expire)"
    );
    // Written by hand, until the year 2999: refused by the API server.
    let me = request::whoami(&ns.client).await.unwrap().username;
    let forever = json!({"apiVersion": "tether.dev/v1alpha1", "kind": "BreakGlass",
        "metadata": {"name": "forever"},
        "spec": {"application": "shop", "reason": "INC-3: forever",
                 "openedBy": {"username": me}, "expiresAt": "2999-01-01T00:00:00Z"}});
    let stderr = refused(
        ns.kubectl_with_stdin(&["create", "-f", "-"], &forever.to_string()),
        "a window until 2999",
    );
    assert!(
        stderr.contains("spec.expiresAt is more than 1d after the opening"),
        "{stderr}"
    );
    // An extension written by hand far beyond the cap: refused too.
    let open = request::open(&ns.client, opening(ns, &[], Duration::from_secs(600)))
        .await
        .unwrap();
    let error = request::extend(
        &ns.client,
        &open,
        Duration::from_secs(48 * 3600),
        DEFAULT_MAX_TTL,
        "more",
    )
    .await
    .unwrap_err();
    assert!(matches!(error, RequestError::TooLong(_)), "{error}");
    let patch = json!({"spec": {"extensions": [{"by": me, "at": "2026-12-03T00:00:00Z",
        "expiresAt": "2999-01-01T00:00:00Z", "reason": "forever"}]}});
    let stderr = refused(
        ns.kubectl(&[
            "patch",
            "breakglass",
            &open.name_any(),
            "--type=merge",
            "-p",
            &patch.to_string(),
        ]),
        "an extension until 2999",
    );
    assert!(stderr.contains("an extension lasts at most 1d"), "{stderr}");
    // A window within the policy's cap but beyond the controller's is
    // Invalid and suspends nothing: a manual change is reverted.
    let long = request::open(&ns.client, opening(ns, &[], Duration::from_secs(2 * 3600)))
        .await
        .unwrap();
    let invalid = window_where(ns, &long.name_any(), "the 2 h window Invalid", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.phase.is_some_and(|phase| phase == "Invalid"))
    })
    .await;
    let message = &invalid.status.unwrap().conditions[0].message;
    assert!(message.contains("longer than the cap of 1h"), "{message}");
    request::close(&ns.client, &open, Resolution::Revert)
        .await
        .unwrap();
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=5"]);
    eventually("the scale reverted despite the 2 h window", || async {
        (ns.jsonpath("deployment/web", "{.spec.replicas}") == "2").then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_window_cannot_grant_a_system_group() {
    let setup = setup("bga-groups", DEFAULT_MAX_TTL).await;
    let ns = &setup.ns;
    // The test's user is a cluster administrator (system:masters), and a
    // window opened through Tether does not say so: system: groups are
    // not a person on call.
    let window = request::open(&ns.client, opening(ns, &[], Duration::from_secs(600)))
        .await
        .unwrap();
    assert!(
        window
            .spec
            .opened_by
            .groups
            .iter()
            .all(|g| !g.starts_with("system:")),
        "{:?}",
        window.spec.opened_by.groups
    );
    // Claimed by hand, even by a real member: refused by the API server.
    let me = request::whoami(&ns.client).await.unwrap().username;
    let expires = format_time(SystemTime::now() + Duration::from_secs(600));
    for groups in [json!(["system:masters"]), json!(["platform-admins"])] {
        let claimed = json!({"apiVersion": "tether.dev/v1alpha1", "kind": "BreakGlass",
            "metadata": {"generateName": "claimed-"},
            "spec": {"application": "shop", "reason": "INC-4: claimed",
                     "openedBy": {"username": me, "groups": groups},
                     "expiresAt": expires}});
        let stderr = refused(
            ns.kubectl_with_stdin(&["create", "-f", "-"], &claimed.to_string()),
            &format!("a window claiming {groups}"),
        );
        assert!(
            stderr.contains("spec.openedBy.groups may name only groups of the requesting user"),
            "{stderr}"
        );
    }
}
