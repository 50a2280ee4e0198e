//! The dashboard in a real browser (Debian's headless Chromium over
//! WebDriver) against the local control plane and a real controller:
//! three apps in three states, a `kubectl scale` seen on the overview
//! without a reload, the drift record naming kubectl on the app page,
//! "Sync now" healing it, a break-glass window opened from the page that
//! records a change and is closed — and a planted Secret value in no page.
//! Screenshots go to `target/test-artifacts/dashboard/`.

mod support;

use std::time::Duration;

use kube::api::Api;
use serde_json::json;
use support::dashboard::{dashboard, get_without};
use support::{Repo, installed, run_controller, tether_command};
use tether_controller::api::{Application, BreakGlass};
use tether_core::OperationalState;
use tether_testkit::browser::Browser;
use tether_testkit::{application, eventually, status_of};

/// A value that must never reach the browser.
const PLANTED: &str = "planted-browser-secret-8c2e7a";

const WEB: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n";

/// A Job whose only pod exits 1 (kube-local's fake kubelet fails
/// `tether.test/fail`): applied, and failing.
const FAILING: &str = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\nspec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n        - name: migrate\n          image: tether.test/fail:1\n";

fn config(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  colour: blue\n")
}

fn secret() -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: api-token\nstringData:\n  token: {PLANTED}\n"
    )
}

/// Fails when the page the browser holds shows the planted value, or when
/// the bodies served for its URL and for its live part (`#live`'s
/// `data-live`, what live.js refetches) hold it. (The event stream names
/// no object, only that something changed.)
async fn no_secret_in(browser: &Browser, what: &str) {
    let html = browser.html().await;
    assert!(!html.contains(PLANTED), "{what} shows the Secret value");
    let page = reqwest::Url::parse(&browser.url().await).expect("the page's URL");
    let mut urls = vec![page.clone()];
    if let Some(fragment) = browser.attribute("#live", "data-live").await {
        // Relative to the page's <base href>, as live.js resolves it.
        let base = browser.attribute("base", "href").await;
        let base = page
            .join(base.as_deref().unwrap_or("."))
            .expect("the base URL");
        urls.push(base.join(&fragment).expect("the live part's URL"));
    }
    let client = reqwest::Client::new();
    for url in urls {
        get_without(&client, url.as_str(), PLANTED).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_overview_app_page_sync_and_break_glass_work_in_a_real_browser() {
    let ns = installed("dash-browser").await;
    let n = ns.name.clone();
    let repo = Repo::new();
    repo.commit(
        &[
            ("web/web.yaml", WEB.to_string()),
            ("web/secret.yaml", secret()),
            ("jobs/migrate.yaml", FAILING.to_string()),
            ("settings/settings.yaml", config("settings")),
        ],
        "three apps",
    );
    for (name, path) in [("web", "web"), ("jobs", "jobs"), ("settings", "settings")] {
        let app = application(name, &n, &repo.url(), path)
            .sync_policy(json!({"automated": true, "selfHeal": false}));
        ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &app.manifest().to_string());
    }
    let _controller = run_controller(&ns, "dash-browser");
    let apps: Api<Application> = ns.api();
    let state = |want: OperationalState| {
        move |s: &tether_controller::api::ApplicationStatus| s.state == Some(want)
    };
    status_of(
        &apps,
        "web",
        "Converged",
        state(OperationalState::Converged),
    )
    .await;
    status_of(
        &apps,
        "jobs",
        "AppliedButFailing",
        state(OperationalState::AppliedButFailing),
    )
    .await;
    status_of(
        &apps,
        "settings",
        "Converged",
        state(OperationalState::Converged),
    )
    .await;
    ns.kubectl_ok(&[
        "patch",
        "configmap",
        "settings",
        "-p",
        r#"{"data":{"colour":"red"}}"#,
    ]);
    status_of(
        &apps,
        "settings",
        "DriftedOrPending",
        state(OperationalState::DriftedOrPending),
    )
    .await;

    let (_dashboard, base) = dashboard(tether_command(&ns, &[]), &n).await;
    let base = format!("{base}/");

    let browser = Browser::start(false).await;
    browser.goto(&base).await;
    browser
        .wait_text("#connection", Duration::from_secs(10), |t| {
            t.starts_with("Live")
        })
        .await;
    for (state, count) in [
        ("Converged", "1"),
        ("AppliedButFailing", "1"),
        ("DriftedOrPending", "1"),
        ("Broken", "0"),
    ] {
        let css = format!("li[data-state={state}] .count");
        browser
            .wait_text(&css, Duration::from_secs(10), |t| t == count)
            .await;
    }
    for (app, sync, health) in [
        ("web", "Synced", "Healthy"),
        ("jobs", "Synced", "Degraded"),
        ("settings", "OutOfSync", "Healthy"),
    ] {
        // The rows may arrive a moment after the counts (a loaded machine).
        let row = format!("tr[data-app=\"{n}/{app}\"]");
        let within = Duration::from_secs(10);
        browser
            .wait_text(&format!("{row} td.sync"), within, |t| t == sync)
            .await;
        browser
            .wait_text(&format!("{row} td.health"), within, |t| t == health)
            .await;
    }
    let shot = browser.screenshot("overview").await;
    println!("overview: {}", shot.display());
    no_secret_in(&browser, "the overview").await;

    // kubectl scale, self-heal off: the row turns OutOfSync without a reload.
    let web_sync = format!("tr[data-app=\"{n}/web\"] td.sync");
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=3"]);
    let took = browser
        .wait_text(&web_sync, Duration::from_secs(2), |t| t == "OutOfSync")
        .await;
    println!("kubectl scale → overview row OutOfSync: {took:?}");

    // The app page: the drift record names kubectl, desired 1, live 3.
    browser
        .click(&format!("tr[data-app=\"{n}/web\"] th a"))
        .await;
    browser
        .wait_text("#drift td.field", Duration::from_secs(5), |t| {
            t == "spec.replicas"
        })
        .await;
    assert_eq!(
        browser.text("#drift td.desired").await.as_deref(),
        Some("1")
    );
    assert_eq!(browser.text("#drift td.live").await.as_deref(), Some("3"));
    let writer = browser.text("#drift td.writer").await.unwrap_or_default();
    assert!(writer.contains("kubectl"), "{writer}");
    browser
        .wait_text("#objects", Duration::from_secs(5), |tree| {
            tree.contains("ReplicaSet") && tree.contains("Pod")
        })
        .await;
    let shot = browser.screenshot("app").await;
    println!("app page: {}", shot.display());
    no_secret_in(&browser, "the app page").await;

    // Sync now, confirmed: Synced within 2 s.
    browser.click("a#sync-now").await;
    browser.click("button#confirm").await;
    let took = browser
        .wait_text("#sync-status", Duration::from_secs(2), |t| {
            t.ends_with("Synced") && !t.contains("Out")
        })
        .await;
    println!("Sync now → page shows Synced: {took:?}");

    // A break-glass window opened from the page: a reason is required.
    browser.click("a#open-window").await;
    browser
        .type_into("textarea[name=reason]", "INC-42: checkout is slow")
        .await;
    browser
        .type_into("textarea[name=scope]", "Deployment/web")
        .await;
    browser.click("button#confirm").await;
    browser
        .wait_text("#phase", Duration::from_secs(10), |t| t == "Open")
        .await;
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=4"]);
    let windows: Api<BreakGlass> = ns.api();
    eventually("the scale recorded in the window", || async {
        let recorded = windows.list(&Default::default()).await.ok()?.items;
        let counted = |w: &BreakGlass| w.status.as_ref().is_some_and(|s| s.record_count >= 1);
        recorded.iter().any(counted).then_some(())
    })
    .await;
    let took = browser
        .wait_text("#records", Duration::from_secs(2), |t| {
            t.contains("spec.replicas")
        })
        .await;
    println!("change recorded in the window → shown on its page: {took:?}");
    let shot = browser.screenshot("break-glass").await;
    println!("window page: {}", shot.display());
    browser.click("a#close-window").await;
    browser.click("button#confirm").await;
    browser
        .wait_text("#phase", Duration::from_secs(10), |t| t == "Closed")
        .await;
    no_secret_in(&browser, "the window page").await;

    // The same overview in the dark colour scheme, for the eye.
    let dark = Browser::start(true).await;
    dark.goto(&base).await;
    dark.wait_text("#connection", Duration::from_secs(10), |t| {
        t.starts_with("Live")
    })
    .await;
    println!(
        "overview (dark): {}",
        dark.screenshot("overview-dark").await.display()
    );
}
