//! The dashboard's actions driven with plain HTTP, as a browser without
//! script would: each confirmation page's form token, then the POST. Sync
//! now heals a hand-scaled Deployment; a break-glass window is refused
//! without a reason, opened as the user, records a change and is closed;
//! a user of one namespace is told "forbidden" for another's app; a
//! foreign `Host` is refused.

mod support;

use std::time::{Duration, Instant, SystemTime};

use kube::api::Api;
use serde_json::{Value, json};
use support::dashboard::{dashboard, not_following};
use support::{
    Repo, Running, create_app, installed, pushable_settings_repo, run_controller, tether_command,
    tether_command_as,
};
use tether_controller::api::{Application, BreakGlass};
use tether_controller::install::rbac::TENANT_ROLE;
use tether_core::SyncStatus;
use tether_core::window::WindowPhase;
use tether_testkit::{TestNamespace, eventually, status_of};

const WEB: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n";

/// The form token of the confirmation page at `url`.
async fn form_token(client: &reqwest::Client, url: &str) -> String {
    let page = client.get(url).send().await.unwrap();
    assert!(page.status().is_success(), "{url}: {}", page.status());
    let page = page.text().await.unwrap();
    assert!(page.contains("id=\"confirm\""), "{page}");
    let (_, rest) = page
        .split_once("name=\"token\" value=\"")
        .expect("the page's form carries a token");
    rest.split('"').next().unwrap().to_string()
}

/// POSTs `form` to `url`: the status, `Location` and body.
async fn post(client: &reqwest::Client, url: &str, form: &[(&str, &str)]) -> (u16, String, String) {
    let body: Vec<String> = form
        .iter()
        .map(|(key, value)| format!("{}={}", encoded(key), encoded(value)))
        .collect();
    let answer = client
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body.join("&"))
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    let location = answer
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, location, answer.text().await.unwrap())
}

/// Confirms the action at `url` as its page's form does: the page's token
/// and `fields`, posted; the status, `Location` and body.
async fn confirm(
    client: &reqwest::Client,
    url: &str,
    fields: &[(&str, &str)],
) -> (u16, String, String) {
    let token = form_token(client, url).await;
    let form = [&[("token", token.as_str())][..], fields].concat();
    post(client, url, &form).await
}

/// Waits until window `name` has recorded a change.
async fn wait_recorded(windows: &Api<BreakGlass>, name: &str) {
    eventually("a change recorded in the window", || async {
        let window = windows.get(name).await.ok()?;
        (window.status?.record_count >= 1).then_some(())
    })
    .await;
}

/// Panics unless window `name` is closed.
async fn assert_closed(windows: &Api<BreakGlass>, name: &str) {
    let window = windows.get(name).await.unwrap();
    assert_eq!(
        window.times().unwrap().phase(SystemTime::now()),
        WindowPhase::Closed
    );
}

/// `text` as a form field: unreserved bytes as they are, the rest `%XX`.
fn encoded(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// The window a 303 to `/break-glass/NS/NAME?done=…` leads to: `NAME`.
fn window_in(location: &str, ns: &str) -> String {
    location
        .strip_prefix(&format!("/break-glass/{ns}/"))
        .and_then(|rest| rest.split('?').next())
        .unwrap_or_else(|| panic!("redirected to the window: {location}"))
        .to_string()
}

/// Application `shop` for `repo`'s `app/` with `policy`, created in `ns`
/// (where Tether is installed) and Synced by the returned controller.
async fn synced_shop(ns: &TestNamespace, repo: &Repo, policy: Value, identity: &str) -> Running {
    create_app(ns, repo, policy);
    let controller = run_controller(ns, identity);
    let apps: Api<Application> = ns.api();
    status_of(&apps, "shop", "Synced", |s| {
        s.sync.status == SyncStatus::Synced
    })
    .await;
    controller
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_now_heals_and_a_window_is_refused_without_a_reason_then_opened_and_closed() {
    let ns = installed("dash-actions").await;
    let n = ns.name.clone();
    let repo = Repo::new();
    repo.commit(&[("app/web.yaml", WEB.to_string())], "web");
    let policy = json!({"automated": true, "selfHeal": false});
    let _controller = synced_shop(&ns, &repo, policy, "dash-actions").await;
    let apps: Api<Application> = ns.api();
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=5"]);
    status_of(&apps, "shop", "OutOfSync after the scale", |s| {
        s.sync.status == SyncStatus::OutOfSync
    })
    .await;

    let (_dashboard, base) = dashboard(tether_command(&ns, &[]), &n).await;
    let client = not_following();

    // The dry run shows the plan: the Deployment back to 2 replicas.
    let dry_run = format!("{base}/apps/{n}/shop/dry-run");
    let (status, _, plan) = confirm(&client, &dry_run, &[]).await;
    assert_eq!(status, 200, "{plan}");
    assert!(plan.contains("nothing was applied"), "{plan}");
    assert!(
        plan.contains("<td class=\"action\">configured</td>"),
        "{plan}"
    );
    assert!(plan.contains("<code>spec.replicas</code>: 5 → 2"), "{plan}");

    // Sync now, from its confirmation page.
    let sync = format!("{base}/apps/{n}/shop/sync");
    let token = form_token(&client, &sync).await;
    let (status, location, body) = post(&client, &sync, &[]).await;
    assert_eq!(status, 403, "no token: {body}");
    assert!(body.contains("no CSRF token"), "{body}");
    let posted = Instant::now();
    let (status, location_ok, body) = post(&client, &sync, &[("token", &token)]).await;
    assert_eq!(status, 303, "{body}");
    assert!(location.is_empty());
    assert!(
        location_ok.starts_with(&format!("/apps/{n}/shop?done=sync+of+{n}%2Fshop+requested")),
        "{location_ok}"
    );
    loop {
        let app = apps.get("shop").await.unwrap();
        let synced = app
            .status
            .is_some_and(|s| s.sync.status == SyncStatus::Synced);
        if synced && ns.jsonpath("deployment/web", "{.spec.replicas}") == "2" {
            break;
        }
        assert!(
            posted.elapsed() < Duration::from_secs(10),
            "not Synced 10 s after Sync now"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "Sync now: Synced and healed {:?} after the POST",
        posted.elapsed()
    );

    // A window without a reason is refused, and none is created.
    let open = format!("{base}/apps/{n}/shop/break-glass");
    let (status, _, body) = confirm(&client, &open, &[("reason", "  "), ("duration", "30m")]).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("needs a reason"), "{body}");
    assert!(ns.list::<BreakGlass>().await.is_empty());
    let windows: Api<BreakGlass> = ns.api();

    // With a reason: opened as the user, for the Deployment.
    let (status, location, body) = confirm(
        &client,
        &open,
        &[
            ("reason", "INC-7: checkout 500s"),
            ("scope", "Deployment/web"),
            ("duration", "30m"),
        ],
    )
    .await;
    assert_eq!(status, 303, "{body}");
    let name = window_in(&location, &n);
    let window = windows.get(&name).await.unwrap();
    let me = tether_controller::break_glass::request::whoami(&ns.client)
        .await
        .unwrap();
    assert_eq!(window.spec.opened_by.username, me.username);
    assert_eq!(window.spec.reason, "INC-7: checkout 500s");
    // The page returns once the controller has opened the window.
    assert!(location.contains("self-heal+is+suspended"), "{location}");
    let phase = window.status.and_then(|s| s.phase);
    assert_eq!(phase, Some(tether_core::window::WindowPhase::Open));

    // A change inside the window is recorded in it.
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=4"]);
    wait_recorded(&windows, &name).await;

    // Extended, with a reason of its own.
    let extend = format!("{base}/break-glass/{n}/{name}/extend");
    let (status, location, body) = confirm(
        &client,
        &extend,
        &[("reason", "INC-7: still digging"), ("duration", "45m")],
    )
    .await;
    assert_eq!(status, 303, "{body}");
    assert!(location.contains("extended+until"), "{location}");
    let window = windows.get(&name).await.unwrap();
    assert_eq!(window.spec.extensions.len(), 1);

    // Closed with revert.
    let close = format!("{base}/break-glass/{n}/{name}/close");
    let (status, location, body) = confirm(&client, &close, &[("resolve", "revert")]).await;
    assert_eq!(status, 303, "{body}");
    assert!(
        location.starts_with(&format!("/break-glass/{n}/{name}?done=")),
        "{location}"
    );
    assert_closed(&windows, &name).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_of_one_namespace_is_told_forbidden_for_another_and_a_foreign_host_is_refused() {
    let team_a = installed("dash-team-a").await;
    let team_b = TestNamespace::create("dash-team-b").await;
    let repo = Repo::new();
    repo.commit(&[("app/web.yaml", WEB.to_string())], "web");
    create_app(&team_b, &repo, json!({"automated": false}));
    let user = format!("alice-{}", team_a.name);
    let alice = team_a.user_with_roles(&user, &["edit", TENANT_ROLE]);
    eventually("RBAC for alice", || async {
        let can = team_a
            .kubectl_as(
                &alice,
                &["auth", "can-i", "watch", "applications.tether.dev"],
            )
            .status
            .success();
        can.then_some(())
    })
    .await;

    let (_dashboard, base) = dashboard(tether_command_as(&alice, &[]), &team_a.name).await;
    let client = not_following();
    let sync = format!("{base}/apps/{}/shop/sync", team_b.name);
    let (status, _, body) = confirm(&client, &sync, &[]).await;
    assert_eq!(status, 403, "{body}");
    let said = format!(
        "forbidden: {user} may not patch applications in namespace {}",
        team_b.name
    );
    assert!(body.contains(&said), "{body}");

    // A page asked for under another name (DNS rebinding) is refused.
    let answer = client
        .get(format!("{base}/"))
        .header("host", "rebound.example")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 403);
    assert!(answer.text().await.unwrap().contains("DNS rebinding"));
}

#[tokio::test(flavor = "multi_thread")]
async fn closing_a_window_as_adopted_commits_its_change_with_the_user_as_author() {
    let ns = installed("dash-adopt").await;
    let n = ns.name.clone();
    let repo = pushable_settings_repo();
    let policy = json!({"automated": true, "selfHeal": true});
    let _controller = synced_shop(&ns, &repo, policy, "dash-adopt").await;
    let (_dashboard, base) = dashboard(tether_command(&ns, &[]), &n).await;
    let client = not_following();

    let open = format!("{base}/apps/{n}/shop/break-glass");
    let (status, location, body) = confirm(&client, &open, &[("reason", "INC-9: degrade")]).await;
    assert_eq!(status, 303, "{body}");
    let name = window_in(&location, &n);
    ns.kubectl_ok(&[
        "patch",
        "configmap/settings",
        "-p",
        r#"{"data":{"greeting":"degraded"}}"#,
    ]);
    let windows: Api<BreakGlass> = ns.api();
    wait_recorded(&windows, &name).await;

    let close = format!("{base}/break-glass/{n}/{name}/close");
    let (status, location, body) = confirm(&client, &close, &[("resolve", "adopt")]).await;
    assert_eq!(status, 303, "{body}");
    assert!(location.contains("adopted+into"), "{location}");
    let me = tether_controller::break_glass::request::whoami(&ns.client)
        .await
        .unwrap()
        .username;
    let author = repo.git(&["log", "-1", "--format=%an"]);
    assert_eq!(author, me);
    assert!(
        repo.git(&["log", "-1", "--format=%ae"])
            .ends_with("@tether.local"),
        "{}",
        repo.git(&["log", "-1", "--format=%an <%ae>"])
    );
    assert!(
        repo.git(&["show", "HEAD:app/settings.yaml"])
            .contains("degraded")
    );
    assert_closed(&windows, &name).await;
}
