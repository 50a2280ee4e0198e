//! `tether app create` says what it did to the Application: created,
//! configured, or unchanged.

mod support;

use support::{installed, tether_ok};

#[tokio::test]
async fn app_create_says_created_then_unchanged_then_configured() {
    let ns = installed("cli-app").await;
    let create = |extra: &[&str]| {
        let mut args = vec![
            "app",
            "create",
            "shop",
            "-n",
            &ns.name,
            "--repo",
            "file:///srv/git/shop.git",
            "--path",
            "app",
            "--dest-namespace",
            &ns.name,
            // The repository is never read: no renderer to detect.
            "--renderer",
            "directory",
        ];
        args.extend_from_slice(extra);
        tether_ok(&ns, &args)
    };
    let said = |action: &str| format!("Application {}/shop {action}\n", ns.name);
    assert_eq!(create(&[]), said("created"));
    assert_eq!(create(&[]), said("unchanged"));
    assert_eq!(create(&["--prune"]), said("configured"));
}

#[tokio::test]
async fn a_missing_application_is_an_error_that_names_it_in_words_not_structs() {
    let ns = installed("cli-missing").await;
    let output = support::tether(&ns, &["status", "nosuchapp", "-n", &ns.name]);
    let shown = support::text(&output);
    assert_eq!(output.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains(&format!("Application {}/nosuchapp", ns.name))
            && shown.contains("not found"),
        "{shown}"
    );
    assert!(
        !shown.contains("Status {") && !shown.contains("ErrorResponse"),
        "{shown}"
    );
}
