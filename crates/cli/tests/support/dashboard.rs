//! Shared by the dashboard's end-to-end tests: `tether dashboard` on a
//! free port, and HTTP asked of it as a browser would.

use std::process::Command;

use tether_testkit::{free_port, wait_for};

use super::Running;

/// `tether dashboard -n NAMESPACE` from `command` (whose user it acts
/// as), serving on a free loopback port once this returns; its base URL
/// (`http://ADDRESS`, no trailing slash).
pub async fn dashboard(mut command: Command, namespace: &str) -> (Running, String) {
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    command.args(["dashboard", "-n", namespace, "--address", &address]);
    let running = Running::spawn(command);
    tokio::task::spawn_blocking(move || wait_for(port))
        .await
        .unwrap();
    (running, format!("http://{address}"))
}

/// A client that shows each 303 rather than following it.
pub fn not_following() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// GET `url`'s body, which must be a success and must not hold `planted`
/// (a Secret value that must never leave the cluster).
pub async fn get_without(client: &reqwest::Client, url: &str, planted: &str) -> String {
    let response = client.get(url).send().await.expect("the dashboard answers");
    assert!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
    let body = response.text().await.expect("a body");
    assert!(!body.contains(planted), "{url} served the Secret value");
    body
}
