//! Polling without a webhook: a push is applied within the app's
//! `spec.source.interval` although the resync is minutes away, and apps on
//! one repository share one `ls-remote` per interval.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use tether_controller::Config;
use tether_controller::api::Application;
use tether_testkit::git_server::HttpBackend;
use tether_testkit::{Repo, TestNamespace, application, eventually, status_of};

use support::{config_for, start_controller_with};

/// A resync far beyond any test's patience: only polling can apply a push.
const RESYNC: Duration = Duration::from_secs(300);

fn greeting(dir: &str, text: &str) -> [(String, String); 1] {
    [(
        format!("{dir}/config.yaml"),
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {dir}\ndata:\n  greeting: \"{text}\"\n"
        ),
    )]
}

/// A namespace with a controller resyncing every 5 minutes, and `repo`
/// served over smart HTTP as `shop.git`, so its requests can be counted.
async fn setup(prefix: &str, repo: &Repo) -> (TestNamespace, HttpBackend) {
    let ns = TestNamespace::create(prefix).await;
    let server = HttpBackend::start(&repo.publish("shop"), None);
    let config = Config {
        resync: RESYNC,
        ..config_for(&ns)
    };
    start_controller_with(&ns, config).await;
    (ns, server)
}

/// Application `name` for directory `name` of the served repository,
/// polled every `interval`; once Synced.
async fn synced_app(
    ns: &TestNamespace,
    server: &HttpBackend,
    name: &str,
    interval: &str,
) -> Api<Application> {
    let apps = application(name, &ns.name, &server.url("shop"), name)
        .interval(interval)
        .apply(&ns.client)
        .await;
    status_of(&apps, name, "Synced", |s| s.sync.status == "Synced").await;
    apps
}

async fn greeting_of(ns: &TestNamespace, name: &str) -> Option<String> {
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    let found = config_maps.get_opt(name).await.ok()??;
    found.data?.get("greeting").cloned()
}

/// The ref listings (`GET …/info/refs?service=git-upload-pack`) in `requests`.
fn listings(requests: &[String]) -> usize {
    requests.iter().filter(|r| r.contains("/info/refs")).count()
}

#[tokio::test]
async fn a_push_is_applied_within_the_poll_interval_without_a_webhook() {
    let repo = Repo::new();
    repo.commit(&greeting("web", "hello"), "first");
    let (ns, server) = setup("poll-push", &repo).await;
    synced_app(&ns, &server, "web", "10s").await;
    // Let the first poll list the refs before the push.
    tokio::time::sleep(Duration::from_secs(2)).await;

    repo.commit(&greeting("web", "polled"), "push");
    repo.publish("shop");
    let pushed = Instant::now();
    eventually("the push to be applied", || async {
        (greeting_of(&ns, "web").await.as_deref() == Some("polled")).then_some(())
    })
    .await;
    let took = pushed.elapsed();
    println!("push → applied without a webhook at interval 10s: {took:.1?}");
    assert!(
        took < Duration::from_secs(16),
        "the push took {took:?} at a 10s interval"
    );
}

#[tokio::test]
async fn apps_on_one_repository_share_one_ls_remote_per_interval() {
    let repo = Repo::new();
    repo.commit(&greeting("web", "hello"), "web");
    repo.commit(&greeting("api", "hello"), "api");
    let (ns, server) = setup("poll-shared", &repo).await;
    synced_app(&ns, &server, "web", "5s").await;
    synced_app(&ns, &server, "api", "5s").await;
    // Nothing changes from here: every listing is a poll.
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.take_requests();
    tokio::time::sleep(Duration::from_secs(21)).await;
    let polls = listings(&server.take_requests());
    println!("ref listings in 21 s, two apps at 5s on one repository: {polls}");
    assert!(
        (3..=5).contains(&polls),
        "{polls} listings in 21 s: expected one per 5 s for both apps together"
    );
}
