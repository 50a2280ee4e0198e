//! Hostile repositories against the running controller: the review's
//! alias file (40 YAML documents of nested aliases, 9 KB) and Jsonnet
//! bomb each fail with a clear condition, the controller's memory stays
//! small, and another app keeps syncing meanwhile. The controller runs in
//! this test process, so the process's RSS is the controller's.

mod support;

use kube::api::Api;
use serde_json::{Value, json};
use support::{Repo, app, greeting_is, start_controller};
use tether_controller::api::Application;
use tether_testkit::{TestNamespace, alias_bomb, condition, eventually};

/// Resident memory of this process, in MB (from /proc/self/status).
fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kb: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb / 1024.0
}

fn greeting(text: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\ndata:\n  text: \"{text}\"\n"
    )
}

async fn create(ns: &TestNamespace, name: &str, repo: &Repo, path: &str, renderer: Value) {
    app(ns, name, repo, path)
        .renderer(renderer)
        .apply(&ns.client)
        .await;
}

/// The message of `name`'s failed `Reconciled` condition, once there is one.
async fn failure(ns: &TestNamespace, name: &str) -> String {
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &ns.name);
    eventually(&format!("{name} fails"), || async {
        let status = apps.get(name).await.ok()?.status?;
        condition(&status, "Reconciled")
            .filter(|c| c.status == "False")
            .map(|c| c.message.clone())
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_alias_file_and_a_jsonnet_bomb_leave_the_controller_small_and_other_apps_syncing() {
    let ns = TestNamespace::create("hostile").await;
    start_controller(&ns).await;
    let repo = Repo::new();
    repo.commit(
        &[
            ("good/greeting.yaml", greeting("hello")),
            ("aliases/bomb.yaml", alias_bomb(40)),
            (
                "jsonnet/main.jsonnet",
                "local x = std.foldl(function(a, b) a + [b], std.range(1, 20000000), []); x\n"
                    .into(),
            ),
        ],
        "a good app and two hostile ones",
    );
    create(&ns, "good", &repo, "good", json!({"directory": {}})).await;
    greeting_is(&ns, "hello").await;
    let before = rss_mb();

    create(&ns, "aliases", &repo, "aliases", json!({"directory": {}})).await;
    create(&ns, "jsonnet", &repo, "jsonnet", json!({"jsonnet": {}})).await;
    let aliases = failure(&ns, "aliases").await;
    assert!(
        aliases.contains("aliases/bomb.yaml") && aliases.contains("YAML aliases"),
        "{aliases}"
    );
    let jsonnet = failure(&ns, "jsonnet").await;
    assert!(jsonnet.contains("exceeded the memory limit"), "{jsonnet}");

    // The other app keeps syncing while the hostile ones are retried.
    repo.commit(
        &[("good/greeting.yaml", greeting("still here"))],
        "a change to the good app",
    );
    greeting_is(&ns, "still here").await;
    let after = rss_mb();
    println!(
        "controller (test process) RSS: {before:.1} MB before the attacks, {after:.1} MB after"
    );
    assert!(after < 150.0, "RSS {after:.1} MB after the attacks");
}
