//! An incident, driven through the real `tether` binary as an operator
//! would: `tether run` in the background, `tether drift` showing a manual
//! change and who made it, `tether break-glass open|list|show|close`
//! around an emergency change, against the real local control plane.

mod support;

use std::process::Output;

use serde_json::Value;
use support::{
    Repo, app_create_shop, run_controller, run_controller_resyncing, run_controller_with, tether,
    tether_ok,
};
use tether_testkit::{TestNamespace, eventually};

/// Runs `tether break-glass open shop -n NS MORE…` and returns the name of
/// the window it opened (printed as `opened NS/NAME …`). The command returns
/// only once the controller has marked the window Open (a change made
/// before that would be reverted), so it is Open at once.
async fn open_window(ns: &TestNamespace, more: &[&str]) -> String {
    let args = [&["break-glass", "open", "shop", "-n", &ns.name][..], more].concat();
    let opened = tether_ok(ns, &args);
    assert!(opened.contains("self-heal is suspended"), "{opened}");
    let name = opened
        .split_whitespace()
        .nth(1)
        .and_then(|w| w.split('/').nth(1))
        .unwrap()
        .to_string();
    let window = format!("breakglass/{name}");
    assert_eq!(ns.jsonpath(&window, "{.status.phase}"), "Open", "{opened}");
    name
}

/// A new namespace with Tether installed and app `shop` for a repository
/// holding one ConfigMap; no controller runs yet.
async fn installed_shop(prefix: &str) -> (TestNamespace, Repo) {
    let ns = TestNamespace::create(prefix).await;
    let repo = Repo::new();
    repo.commit(
        &[("app/cm.yaml", support::config_map("settings", "a"))],
        "cm",
    );
    tether_ok(&ns, &["install", "-n", &ns.name]);
    app_create_shop(&ns, &repo);
    (ns, repo)
}

/// Runs `tether break-glass close WINDOW -n NS MORE…` to the end.
fn close_window(ns: &TestNamespace, window: &str, more: &[&str]) -> Output {
    let args = [&["break-glass", "close", window, "-n", &ns.name][..], more].concat();
    tether(ns, &args)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_incident_through_the_cli_drift_then_break_glass_then_revert() {
    let ns = TestNamespace::create("cli-incident").await;
    let repo = Repo::new();
    repo.commit(
        &[(
            "app/web.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.27\n".to_string(),
        )],
        "web",
    );

    let n = ns.name.as_str();
    tether_ok(&ns, &["install", "-n", n]);
    let _controller = run_controller(&ns, "incident");
    app_create_shop(&ns, &repo);
    eventually("Synced", || async {
        let status: Value =
            serde_json::from_str(&tether_ok(&ns, &["status", "shop", "-n", n, "-o", "json"]))
                .ok()?;
        let text = status.to_string();
        text.contains("\"Synced\"").then_some(())
    })
    .await;

    // A manual change: reverted, and `tether drift` says by whom.
    ns.kubectl_ok(&["scale", "deployment/web", "--replicas=5"]);
    let row = eventually("the scale in tether drift", || async {
        // Exit code 1 while the drift is unresolved, 0 once healed.
        let output = tether(&ns, &["drift", "shop", "-n", n, "-o", "json"]);
        let rows: Value = serde_json::from_slice(&output.stdout).ok()?;
        rows.as_array()?
            .iter()
            .find(|r| r["field"]["path"] == "spec.replicas" && r["field"]["live"] == 5)
            .cloned()
    })
    .await;
    assert_eq!(row["kind"], "Manual");
    assert_eq!(row["field"]["desired"], 2);
    assert_eq!(row["field"]["writer"]["manager"], "kubectl");
    eventually("the scale healed", || async {
        (ns.jsonpath("deployment/web", "{.spec.replicas}") == "2").then_some(())
    })
    .await;
    let healed = eventually("the drift resolved", || async {
        let output = tether(&ns, &["drift", "shop", "-n", n]);
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).to_string())
    })
    .await;
    // Healed drift is history: not a row of the table as it stands, but
    // there with --resolved, saying when it was healed.
    assert!(healed.starts_with("APP  "), "{healed}");
    assert!(!healed.contains("spec.replicas"), "{healed}");
    assert!(healed.contains("resolved recently"), "{healed}");
    let history = tether_ok(&ns, &["drift", "shop", "-n", n, "--resolved"]);
    assert!(
        history.contains("spec.replicas")
            && history.contains("Manual")
            && history.contains("Healed at"),
        "{history}"
    );

    // Bad input: a window without a reason, a bad ttl, an unknown app.
    for (app, reason, ttl) in [
        ("shop", " ", "1h"),
        ("shop", "INC-9", "soon"),
        ("nope", "INC-9", "1h"),
    ] {
        let args = [
            "break-glass",
            "open",
            app,
            "-n",
            n,
            "--reason",
            reason,
            "--ttl",
            ttl,
        ];
        let output = tether(&ns, &args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(!String::from_utf8_lossy(&output.stderr).trim().is_empty());
    }
    assert!(!tether_ok(&ns, &["break-glass", "list", "-n", n]).contains("shop-"));

    // The incident: a window on the Deployment, an emergency image change.
    let window = open_window(
        &ns,
        &[
            "--resource",
            "Deployment/web",
            "--reason",
            "INC-42: roll back the image",
            "--ttl",
            "10m",
        ],
    )
    .await;
    ns.kubectl_ok(&["set", "image", "deployment/web", "web=nginx:1.26"]);
    let shown = eventually("the change and its check in break-glass show", || async {
        let shown = tether_ok(&ns, &["break-glass", "show", &window, "-n", n]);
        (shown.contains("nginx:1.26") && shown.contains("audit log (controller): 1 record(s)"))
            .then_some(shown)
    })
    .await;
    assert!(shown.contains("INC-42: roll back the image"), "{shown}");
    assert!(shown.contains("by kubectl-set"), "{shown}");
    // The controller verified the seal with its key; the CLI, without it,
    // checked the sequence against the count in status.
    assert!(
        shown.contains("audit log (controller): 1 record(s), chain intact, every seal verified"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "audit log (here, in {n}): 1 record(s), chain intact, seals not checked here"
        )),
        "{shown}"
    );
    let list = tether_ok(&ns, &["break-glass", "list", "-n", n]);
    assert!(list.contains(&window) && list.contains("Open"), "{list}");
    // Unresolved drift: exit code 1. The pass that recorded the change
    // writes the app's drift after the record.
    eventually("tether drift to report the Emergency drift", || async {
        let drift = tether(&ns, &["drift", "shop", "-n", n]);
        let said = String::from_utf8_lossy(&drift.stdout);
        (drift.status.code() == Some(1) && said.contains("Emergency") && said.contains("Reported"))
            .then_some(())
    })
    .await;

    // Close with revert: self-heal takes the image back.
    let closed = close_window(&ns, "shop", &["--resolve", "revert"]);
    assert!(closed.status.success(), "{}", support::text(&closed));
    eventually("the image reverted", || async {
        let image = ns.jsonpath(
            "deployment/web",
            "{.spec.template.spec.containers[0].image}",
        );
        (image == "nginx:1.27").then_some(())
    })
    .await;
    let list = tether_ok(&ns, &["break-glass", "list", "-n", n]);
    assert!(list.contains("Closed"), "{list}");
    // A closed window cannot be closed again.
    let again = close_window(&ns, &window, &["--resolve", "revert"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr)
            .contains("is Closed: only an open window can be closed"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

/// `tether adopt` wakes the app, so the adopted commit is synced now, not
/// at the next resync (5 minutes here); closing the window as adopted
/// afterwards closes it, though there is nothing left to commit.
#[tokio::test(flavor = "multi_thread")]
async fn adopt_wakes_the_app_and_closing_as_adopted_afterwards_just_closes() {
    let ns = TestNamespace::create("cli-adopt-wake").await;
    let repo = support::pushable_settings_repo();
    let n = ns.name.as_str();
    tether_ok(&ns, &["install", "-n", n]);
    let _controller = run_controller_resyncing(&ns, "adopt-wake", 300);
    support::create_app(
        &ns,
        &repo,
        serde_json::json!({"automated": true, "selfHeal": true}),
    );
    let synced_to = |revision: String| {
        let ns = &ns;
        async move {
            let status = tether_ok(ns, &["status", "shop", "-n", n, "-o", "json"]);
            status.contains(&revision).then_some(())
        }
    };
    eventually("Synced", || synced_to(repo.head())).await;

    let window = open_window(&ns, &["--reason", "INC-7: degrade", "--ttl", "10m"]).await;
    ns.kubectl_ok(&[
        "patch",
        "configmap/settings",
        "-p",
        r#"{"data":{"greeting":"degraded"}}"#,
    ]);
    eventually("the change recorded", || async {
        tether_ok(&ns, &["break-glass", "show", &window, "-n", n])
            .contains("\"degraded\"")
            .then_some(())
    })
    .await;

    let adopted = tether_ok(
        &ns,
        &[
            "adopt",
            "shop",
            "-n",
            n,
            "--window",
            &window,
            "--author",
            "Ada <ada@example.com>",
        ],
    );
    assert!(
        adopted.contains("asked to sync the commit now"),
        "{adopted}"
    );
    let woken = std::time::Instant::now();
    eventually("Synced to the adopted commit", || synced_to(repo.head())).await;
    assert!(
        woken.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        woken.elapsed()
    );

    let closed = close_window(
        &ns,
        &window,
        &["--resolve", "adopt", "--author", "Ada <ada@example.com>"],
    );
    assert!(closed.status.success(), "{}", support::text(&closed));
    let closed = support::text(&closed);
    assert!(closed.contains("Git already holds its changes"), "{closed}");
    assert!(
        closed.contains("closed (changes adopted into Git)"),
        "{closed}"
    );
    assert_eq!(
        ns.jsonpath("configmap/settings", "{.data.greeting}"),
        "degraded"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn break_glass_open_without_a_controller_fails_naming_the_window_it_created() {
    let (ns, _repo) = installed_shop("cli-unopened").await;
    let n = ns.name.as_str();

    let open = |more: &[&str]| {
        let args = [&["break-glass", "open", "shop", "-n", n][..], more].concat();
        tether(&ns, &args)
    };
    let output = open(&["--reason", "INC-5", "--timeout", "2"]);
    refused_naming_a_window(
        &output,
        &ns,
        "was created, but no controller opened it within 2s",
    );

    // --no-wait returns at once, saying it did not wait.
    let output = open(&["--reason", "INC-6", "--no-wait"]);
    let opened = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{opened}");
    assert!(
        opened.contains("(not waiting for the controller)"),
        "{opened}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn break_glass_open_past_the_controllers_cap_fails_with_the_controllers_reason() {
    // Installed with the default cap (24h), but run with 1h: the admission
    // policy lets a 2h window in, and the controller marks it Invalid.
    let (ns, _repo) = installed_shop("cli-invalid").await;
    let n = ns.name.as_str();
    let _controller = run_controller_with(&ns, &ns, "a", 2, &["--max-break-glass-ttl", "1h"]);

    let args = ["break-glass", "open", "shop", "-n", n];
    let output = tether(
        &ns,
        &[&args[..], &["--reason", "INC-7", "--ttl", "2h"]].concat(),
    );
    refused_naming_a_window(&output, &ns, "longer than the cap of 1h");
    let phases = ns.jsonpath("breakglass", "{.items[*].status.phase}");
    assert_eq!(phases, "Invalid");
}

/// Asserts that `output` is a refusal (exit 2) that names the window it
/// created for app `shop` in `ns` and says `words`.
fn refused_naming_a_window(output: &Output, ns: &TestNamespace, words: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("BreakGlass {}/shop-", ns.name)) && stderr.contains(words),
        "{stderr}"
    );
}
