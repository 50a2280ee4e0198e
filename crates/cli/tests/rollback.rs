//! `tether rollback APP` driven like an operator would, against the real
//! local control plane, a real `tether run` and a real Git repository:
//! the app is pinned to its previous revision within 2 s, stays pinned
//! across a controller restart (self-heal keeps the pinned state), an
//! unknown history id changes nothing, `--clear` lifts the pin, and
//! `--revert` commits the revert to the branch, after which the pin lifts
//! on its own (`GitMatches`).

mod support;

use std::process::Output;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use support::{
    config_map, create_app, error_text, installed, pushable_settings_repo, run_controller, tether,
    tether_blocking, tether_ok,
};
use tether_controller::api::Application;
use tether_controller::api::pin::PINNED_CONDITION;
use tether_core::ConditionStatus::{self, False, True};
use tether_core::{Initiator, SyncStatus};
use tether_testkit::{TestNamespace, eventually};

/// The ConfigMap's greeting, once it is `greeting`.
async fn greeting_is(ns: &TestNamespace, greeting: &str) {
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    eventually(&format!("greeting {greeting:?}"), || async {
        let cm = config_maps.get_opt("settings").await.ok()??;
        (cm.data?.get("greeting")? == greeting).then_some(())
    })
    .await;
}

/// Application `shop` once `check` holds of it.
async fn app_where(
    ns: &TestNamespace,
    what: &str,
    check: impl Fn(&Application) -> bool,
) -> Application {
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &ns.name);
    tether_testkit::object_where(&apps, "shop", what, check).await
}

/// `tether rollback shop --reason REASON ARGS` in `ns`, run off the
/// test's runtime (the command waits for the controller).
async fn rollback(ns: &TestNamespace, reason: &str, args: &[&str]) -> Output {
    let mut command = vec![
        "rollback",
        "shop",
        "-n",
        ns.name.as_str(),
        "--reason",
        reason,
    ];
    command.extend(args);
    tether_blocking(ns, &command).await
}

fn synced_to(app: &Application, revision: &str) -> bool {
    app.status
        .as_ref()
        .is_some_and(|s| s.history.first().is_some_and(|h| h.revision == revision))
}

fn pinned(app: &Application) -> Option<(ConditionStatus, String, String)> {
    let condition = app
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == PINNED_CONDITION)?;
    Some((
        condition.status,
        condition.reason.clone(),
        condition.message.clone(),
    ))
}

/// A repository taking pushes, an automated app synced to its first
/// commit ("hello"), then to a second ("broken"): returns the controller,
/// the repository and the two commits.
async fn two_revisions(ns: &TestNamespace) -> (support::Running, support::Repo, String, String) {
    let repo = pushable_settings_repo();
    let good = repo.head();
    let controller = run_controller(ns, "only");
    // The NotSynced alert after 3 s: a pin keeps it counting.
    create_app(
        ns,
        &repo,
        serde_json::json!({"automated": true, "selfHeal": true, "alertNotSyncedAfter": "3s"}),
    );
    app_where(ns, "synced to the good commit", |app| synced_to(app, &good)).await;
    let bad = repo.commit(
        &[("app/settings.yaml", config_map("settings", "broken"))],
        "break it",
    );
    app_where(ns, "synced to the bad commit", |app| synced_to(app, &bad)).await;
    greeting_is(ns, "broken").await;
    (controller, repo, good, bad)
}

#[tokio::test(flavor = "multi_thread")]
async fn rollback_pins_the_previous_revision_within_two_seconds_and_survives_a_restart() {
    let ns = installed("cli-rollback").await;
    let n = ns.name.as_str();
    let (controller, _repo, good, bad) = two_revisions(&ns).await;

    // The history lists the ids, and what a rollback would pick.
    let listed = tether_ok(&ns, &["rollback", "shop", "-n", n, "--history"]);
    assert!(listed.contains("a rollback would pin history"), "{listed}");
    assert!(
        listed.contains(&good[..12]) && listed.contains(&bad[..12]),
        "{listed}"
    );

    // Roll back: the objects are back at the good commit within 2 s.
    let started = Instant::now();
    let out = rollback(&ns, "INC-7: broken greeting", &[]).await;
    assert!(out.status.success(), "{}", error_text(&out));
    greeting_is(&ns, "hello").await;
    let took = started.elapsed();
    println!("rollback: command to objects back at the pinned revision: {took:?}");
    assert!(took < Duration::from_secs(2), "rollback took {took:?}");

    // The pin: in the spec, condition Pinned, history, OutOfSync with the head.
    let app = app_where(&ns, "Pinned True", |app| {
        pinned(app).is_some_and(|(status, _, _)| status == True)
    })
    .await;
    let pin = app.spec.pin.clone().expect("spec.pin");
    assert_eq!(pin.revision, good);
    assert_eq!(pin.reason, "INC-7: broken greeting");
    assert!(!pin.by.is_empty());
    let status = app.status.as_ref().unwrap();
    let entry = status
        .history
        .iter()
        .find(|h| h.revision == good && h.id == pin.history_id.unwrap());
    assert!(
        entry.is_some(),
        "history entry {:?} of {good}: {:?}",
        pin.history_id,
        status.history
    );
    let (_, reason, message) = pinned(&app).unwrap();
    assert_eq!(reason, "RolledBack");
    for part in [
        good.as_str(),
        pin.by.as_str(),
        "INC-7: broken greeting",
        pin.since.as_str(),
        bad.as_str(),
    ] {
        assert!(message.contains(part), "{part:?} not in {message:?}");
    }
    let app = app_where(&ns, "the rollback in history, OutOfSync", |app| {
        let status = app.status.as_ref().unwrap();
        status.sync.status == SyncStatus::OutOfSync
            && status
                .history
                .iter()
                .any(|h| h.initiator == Initiator::Rollback)
    })
    .await;
    let rolled = app
        .status
        .unwrap()
        .history
        .into_iter()
        .find(|h| h.initiator == Initiator::Rollback)
        .unwrap();
    assert_eq!(rolled.revision, good);
    assert_eq!(rolled.by.as_deref(), Some(pin.by.as_str()));
    assert_eq!(rolled.reason.as_deref(), Some("INC-7: broken greeting"));

    // The pin stays visible: the NotSynced alert counts, saying why.
    app_where(&ns, "NotSyncedTooLong True, reason Pinned", |app| {
        app.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "NotSyncedTooLong" && c.status == True && c.reason == "Pinned")
        })
    })
    .await;

    // An unknown history id changes nothing, and says which app and id.
    let refused = tether(&ns, &["rollback", "shop", "-n", n, "--to", "99"]);
    assert_eq!(refused.status.code(), Some(2));
    let said = error_text(&refused);
    assert!(
        said.contains(&format!("Application {n}/shop: history has no entry 99")),
        "{said}"
    );
    let app = app_where(&ns, "the app", |_| true).await;
    assert_eq!(app.spec.pin.as_ref(), Some(&pin));
    // A pin in someone else's name is refused by the admission policy.
    let forged = format!(
        r#"{{"spec":{{"pin":{{"revision":"{bad}","by":"mallory","reason":"x","since":"2026-01-01T00:00:00Z"}}}}}}"#
    );
    let refused = ns.kubectl(&[
        "patch",
        "application/shop",
        "--type",
        "merge",
        "-p",
        &forged,
    ]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("spec.pin.by must be the requesting user"),
        "{said}"
    );

    // Rolling back again goes further back, never forward to the bad
    // commit: here there is nothing older.
    let again = tether(&ns, &["rollback", "shop", "-n", n]);
    assert_eq!(again.status.code(), Some(2));
    let said = error_text(&again);
    assert!(said.contains("history has no revision before"), "{said}");
    let app = app_where(&ns, "the app", |_| true).await;
    assert_eq!(app.spec.pin.as_ref(), Some(&pin));

    // Restart the controller: the pin holds, and self-heal keeps it.
    drop(controller);
    let _controller = run_controller(&ns, "again");
    ns.kubectl_ok(&[
        "patch",
        "configmap/settings",
        "-p",
        r#"{"data":{"greeting":"manual"}}"#,
    ]);
    greeting_is(&ns, "hello").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    greeting_is(&ns, "hello").await;
    let app = app_where(&ns, "still pinned", |app| app.spec.pin.is_some()).await;
    assert_eq!(pinned(&app).unwrap().0, True);

    // Lift it by hand: the branch head again.
    let cleared = tether_ok(&ns, &["rollback", "shop", "-n", n, "--clear"]);
    assert!(cleared.contains("lifted"), "{cleared}");
    greeting_is(&ns, "broken").await;
    let app = app_where(&ns, "Pinned False (Cleared)", |app| {
        pinned(app).is_some_and(|(status, reason, _)| status == False && reason == "Cleared")
    })
    .await;
    assert!(app.spec.pin.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn rollback_with_revert_commits_to_the_branch_and_the_pin_lifts_when_it_lands() {
    let ns = installed("cli-rollback-revert").await;
    let n = ns.name.as_str();
    let (_controller, repo, good, bad) = two_revisions(&ns).await;

    let out = rollback(
        &ns,
        "INC-8: revert",
        &["--revert", "--author", "Ada <ada@example.com>"],
    )
    .await;
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{said}{}", error_text(&out));
    assert!(said.contains("revert commit"), "{said}");

    // The commit: on the branch, after the bad one, by the operator,
    // naming the app and the history entry; the app path's tree is the
    // good commit's.
    let head = repo.head();
    assert_ne!(head, bad);
    assert_eq!(repo.git(&["rev-parse", "HEAD~1"]), bad);
    let shown = repo.git(&["log", "-1", "--format=%an <%ae>%n%B"]);
    println!("revert commit {head}:\n{shown}");
    let app = app_where(&ns, "the app", |_| true).await;
    let id = app
        .status
        .as_ref()
        .unwrap()
        .history
        .iter()
        .find(|h| h.revision == good && h.initiator == Initiator::Automated)
        .unwrap()
        .id;
    assert!(shown.starts_with("Ada <ada@example.com>\n"), "{shown}");
    assert!(
        shown.contains(&format!("Roll back Application {n}/shop to history {id}")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("Tether-History-Id: {id}")),
        "{shown}"
    );
    assert_eq!(
        repo.git(&["rev-parse", "HEAD:app"]),
        repo.git(&["rev-parse", &format!("{good}:app")])
    );

    // Once the controller fetches it, the pin lifts on its own.
    let app = app_where(&ns, "Pinned False (GitMatches), no spec.pin", |app| {
        app.spec.pin.is_none()
            && pinned(app)
                .is_some_and(|(status, reason, _)| status == False && reason == "GitMatches")
    })
    .await;
    let history = &app.status.as_ref().unwrap().history;
    let lifted = history
        .iter()
        .find(|h| h.initiator == Initiator::Unpin)
        .expect("an unpin entry");
    assert_eq!(lifted.revision, head);
    assert_eq!(lifted.reason.as_deref(), Some("GitMatches"));
    greeting_is(&ns, "hello").await;
    app_where(&ns, "Synced to the revert commit", |app| {
        let status = app.status.as_ref().unwrap();
        status.sync.status == SyncStatus::Synced
            && status.sync.revision.as_deref() == Some(head.as_str())
    })
    .await;
}
