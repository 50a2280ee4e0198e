//! Repository credentials from a Secret named in `spec.source.secretRef`:
//! a missing or incomplete Secret is a FetchFailed that names it (and never
//! its values); once a labelled Secret exists, the app syncs.

mod support;

use serde_json::json;
use support::{Repo, app, start_controller, status_where, web};
use tether_testkit::TestNamespace;

#[tokio::test(flavor = "multi_thread")]
async fn an_app_waits_for_its_repository_secret_and_never_shows_its_values() {
    let ns = TestNamespace::create("creds").await;
    let repo = Repo::new();
    repo.commit(&web(2, "hello"), "first");
    start_controller(&ns).await;
    let apps = app(&ns, "shop", &repo, "app")
        .secret_ref("repo-creds")
        .apply(&ns.client)
        .await;
    let failed = |needle: &'static str| {
        move |s: &tether_controller::api::ApplicationStatus| {
            s.conditions
                .iter()
                .any(|c| c.reason == "FetchFailed" && c.message.contains(needle))
        }
    };
    status_where(
        &apps,
        "FetchFailed naming the missing Secret",
        failed("not found among repository credentials"),
    )
    .await;

    // A labelled Secret without a password: named, its keys listed, no value shown.
    let secret = |data: serde_json::Value| {
        json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "repo-creds", "namespace": ns.name,
                         "labels": {"tether.dev/secret-type": "repository"}},
            "stringData": data})
    };
    let apply = |object: serde_json::Value| {
        ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &object.to_string());
    };
    apply(secret(json!({"username": "bot", "pasword": "s3cr3t-typo"})));
    let status = status_where(
        &apps,
        "FetchFailed naming the incomplete Secret",
        failed("credentials need"),
    )
    .await;
    let text = serde_json::to_string(&status).unwrap();
    assert!(
        text.contains(&format!("Secret {}/repo-creds", ns.name)),
        "{text}"
    );
    assert!(
        !text.contains("s3cr3t-typo"),
        "a secret value reached status"
    );

    // A complete Secret: the app syncs.
    apply(secret(json!({"username": "bot", "password": "s3cr3t"})));
    let status = status_where(&apps, "Synced", |s| s.sync.status == "Synced").await;
    assert!(!serde_json::to_string(&status).unwrap().contains("s3cr3t"));
}
