//! The `tether` CLI for a tenant whose RBAC covers only their namespace:
//! `edit` and `tether-tenant`, bound there by RoleBindings (the RBAC the
//! README says a tenant gets). The controller runs in a namespace of its
//! own, which the tenant cannot read; the tenant's kubeconfig is found
//! through `$KUBECONFIG`, as in their shell.

mod support;

use std::path::PathBuf;
use std::process::Output;

use kube::api::Api;
use serde_json::json;
use support::{Repo, Running, config_map, create_app, run_controller_for, tether_as, tether_ok};
use tether_controller::api::{Application, BreakGlass};
use tether_controller::install::rbac::TENANT_ROLE;
use tether_core::SyncStatus;
use tether_testkit::{TestNamespace, assert_contains, eventually, object_where, status_of};

/// A tenant namespace with app `shop` synced and then drifted by hand (self-heal
/// off, so the drift stays), the controller's namespace, and `alice`, who
/// may act in the tenant namespace only.
struct Tenancy {
    ns: TestNamespace,
    ctl: TestNamespace,
    alice: PathBuf,
    _controller: Running,
    _repo: Repo,
}

async fn tenancy(prefix: &str) -> Tenancy {
    let ns = TestNamespace::create(prefix).await;
    let ctl = TestNamespace::create(&format!("{prefix}-ctl")).await;
    tether_ok(&ctl, &["install", "--namespace", &ctl.name]);
    let controller = run_controller_for(&ctl, &ns, "tenant", 2);
    let repo = Repo::new();
    repo.commit(
        &[("app/settings.yaml", config_map("settings", "hello"))],
        "hello",
    );
    create_app(&ns, &repo, json!({"selfHeal": false}));
    let apps: Api<Application> = ns.api();
    status_of(&apps, "shop", "Synced", |s| {
        s.sync.status == SyncStatus::Synced
    })
    .await;
    ns.kubectl_ok(&[
        "patch",
        "configmap/settings",
        "--type=merge",
        "-p",
        r#"{"data":{"greeting":"by hand"}}"#,
    ]);
    status_of(&apps, "shop", "the hand edit reported as drift", |s| {
        !s.drift.is_empty()
    })
    .await;

    let alice = ns.user_with_roles(&format!("alice-{}", ns.name), &["edit", TENANT_ROLE]);
    eventually("RBAC for alice", || async {
        let can = |args: &[&str]| {
            let mut command = vec!["auth", "can-i"];
            command.extend_from_slice(args);
            ns.kubectl_as(&alice, &command).status.success()
        };
        (can(&["list", "applications.tether.dev"])
            && can(&["patch", "breakglasses.tether.dev"])
            && can(&["patch", "configmaps"]))
        .then_some(())
    })
    .await;
    Tenancy {
        ns,
        ctl,
        alice,
        _controller: controller,
        _repo: repo,
    }
}

/// Stdout of `output`, which must have exited with `code`.
fn exited(output: &Output, code: i32, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(code),
        "{what}: stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

fn assert_has(text: &str, expected: &[&str]) {
    for expected in expected {
        assert_contains(text, expected);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_sees_status_diff_and_drift_of_their_namespace_with_rights_there_only() {
    let tenancy = tenancy("tenant-read").await;
    let (ns, alice) = (&tenancy.ns, &tenancy.alice);
    let n = ns.name.as_str();

    let table = exited(&tether_as(alice, &["status", "-n", n]), 0, "status");
    assert!(table.starts_with("NAME "), "{table}");
    assert!(table.lines().any(|l| l.starts_with("shop ")), "{table}");

    let detail = exited(
        &tether_as(alice, &["status", "shop", "-n", n]),
        0,
        "status shop",
    );
    assert_has(
        &detail,
        &[
            &format!("Application:  {n}/shop"),
            "Drift:        1 object(s)",
        ],
    );

    let diff = exited(&tether_as(alice, &["diff", "shop", "-n", n]), 1, "diff");
    assert_has(
        &diff,
        &[
            &format!("--- ConfigMap {n}/settings (live)"),
            "-  greeting: by hand",
            "+  greeting: hello",
            "1 of 1 objects differ",
        ],
    );

    let drift = exited(&tether_as(alice, &["drift", "shop", "-n", n]), 1, "drift");
    assert_has(
        &drift,
        &[
            &format!("ConfigMap {n}/settings"),
            "data.greeting",
            "\"hello\"",
            "\"by hand\"",
            "Reported",
        ],
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_opens_lists_shows_and_closes_a_break_glass_window_in_their_namespace() {
    let tenancy = tenancy("tenant-glass").await;
    let (ns, ctl, alice) = (&tenancy.ns, &tenancy.ctl, &tenancy.alice);
    let n = ns.name.as_str();
    let user = format!("alice-{n}");

    let opened = exited(
        &tether_as(
            alice,
            &[
                "break-glass",
                "open",
                "shop",
                "-n",
                n,
                "--resource",
                "ConfigMap/settings",
                "--reason",
                "INC-7: greeting hot fix",
                "--ttl",
                "10m",
            ],
        ),
        0,
        "break-glass open",
    );
    assert_has(&opened, &[&format!("opened by {user} until")]);
    let window = opened
        .split_whitespace()
        .nth(1)
        .and_then(|w| w.strip_prefix(&format!("{n}/")))
        .unwrap_or_else(|| panic!("a window's name in {opened:?}"))
        .to_string();

    let listed = exited(
        &tether_as(alice, &["break-glass", "list", "-n", n]),
        0,
        "break-glass list",
    );
    let row = listed
        .lines()
        .find(|l| l.starts_with(&window))
        .unwrap_or_else(|| panic!("no {window} in:\n{listed}"));
    assert_has(row, &["shop", "Open", &user, "INC-7: greeting hot fix"]);

    // The audit records are in the controller's namespace, which alice
    // cannot read: `show` says so in one line, and still shows the window
    // and the controller's verdict.
    let windows: Api<BreakGlass> = ns.api();
    object_where(&windows, &window, "the controller's verdict", |w| {
        w.status.as_ref().is_some_and(|s| s.audit_chain.is_some())
    })
    .await;
    let shown = exited(
        &tether_as(alice, &["break-glass", "show", &window, "-n", n]),
        0,
        "break-glass show",
    );
    assert_has(
        &shown,
        &[
            &format!("BreakGlass {n}/{window}"),
            "scope:       ConfigMap/settings",
            "audit log (controller): ",
        ],
    );
    let note = shown
        .lines()
        .find(|l| l.starts_with("audit log (here"))
        .unwrap_or_else(|| panic!("no audit line in:\n{shown}"));
    assert_has(
        note,
        &[
            &format!("cannot read the audit records in {}", ctl.name),
            "forbidden",
            "cannot list resource \"configmaps\"",
        ],
    );

    let closed = exited(
        &tether_as(
            alice,
            &[
                "break-glass",
                "close",
                "shop",
                "-n",
                n,
                "--resolve",
                "revert",
            ],
        ),
        0,
        "break-glass close",
    );
    assert_has(
        &closed,
        &[
            &format!("BreakGlass {n}/{window} closed (changes will be reverted)"),
            "self-heal resumes for Application shop",
        ],
    );
    let after = exited(
        &tether_as(alice, &["break-glass", "list", "shop", "-n", n]),
        0,
        "break-glass list after close",
    );
    assert!(
        after
            .lines()
            .any(|l| l.starts_with(&window) && !l.contains(" Open ")),
        "{after}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_asking_about_another_namespace_is_refused_naming_it() {
    let tenancy = tenancy("tenant-other").await;
    let (ns, ctl, alice) = (&tenancy.ns, &tenancy.ctl, &tenancy.alice);
    let other = ctl.name.as_str();
    let user = format!("alice-{}", ns.name);
    let app = format!("Application {other}/shop: ");
    let apps = format!("Applications in namespace {other}: ");
    let windows = format!("BreakGlasses in namespace {other}: ");
    let window = format!("BreakGlass {other}/shop: ");
    for (args, object, refused) in [
        (
            vec!["status", "-n", other],
            &apps,
            "list resource \"applications\"",
        ),
        (
            vec!["status", "shop", "-n", other],
            &app,
            "get resource \"applications\"",
        ),
        (
            vec!["drift", "-n", other],
            &apps,
            "list resource \"applications\"",
        ),
        (
            vec!["diff", "shop", "-n", other],
            &app,
            "get resource \"applications\"",
        ),
        (
            vec!["break-glass", "list", "-n", other],
            &windows,
            "list resource \"breakglasses\"",
        ),
        (
            vec![
                "break-glass",
                "close",
                "shop",
                "-n",
                other,
                "--resolve",
                "revert",
            ],
            &window,
            "get resource \"breakglasses\"",
        ),
        (
            vec![
                "break-glass",
                "open",
                "shop",
                "-n",
                other,
                "--reason",
                "INC-8",
            ],
            &app,
            "get resource \"applications\"",
        ),
    ] {
        let output = tether_as(alice, &args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        println!("{args:?}: {stderr}");
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "{args:?}: printed something");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
        assert_eq!(
            stderr.matches("forbidden").count(),
            1,
            "{args:?}: once: {stderr}"
        );
        assert!(
            stderr.starts_with(&format!("error: {object}")),
            "{args:?}: the object first: {stderr}"
        );
        assert_has(
            &stderr,
            &[
                "forbidden",
                &format!("User \"{user}\" cannot {refused}"),
                &format!("in the namespace \"{other}\""),
            ],
        );
    }
}
