//! A kube client that records every request it sends, so a test can say
//! how many API requests something cost.

use std::sync::{Arc, Mutex};

use kube::Client;
use kube::client::{Body, ClientBuilder};
use tower::util::MapRequestLayer;

/// The requests a [`recording_client`] sent, as `VERB path?query` lines.
#[derive(Clone, Default)]
pub struct Requests(Arc<Mutex<Vec<String>>>);

impl Requests {
    /// Everything recorded since the last call, and forgets it.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("lock"))
    }

    /// How many of `requests` are not watches (long-running GETs with
    /// `watch=true`), i.e. the requests an action cost.
    pub fn beyond_watches(requests: &[String]) -> Vec<&String> {
        requests
            .iter()
            .filter(|r| !r.contains("watch=true"))
            .collect()
    }
}

/// A client for the cluster in `kubeconfig` that records its requests.
pub async fn recording_client(kubeconfig: &std::path::Path) -> (Client, Requests) {
    let config = crate::namespace::config_for(kubeconfig).await;
    let requests = Requests::default();
    let log = requests.0.clone();
    let layer = MapRequestLayer::new(move |request: http::Request<Body>| {
        let uri = request.uri();
        let line = format!(
            "{} {}",
            request.method(),
            uri.path_and_query().map_or(uri.path(), |p| p.as_str())
        );
        log.lock().expect("lock").push(line);
        request
    });
    let client = ClientBuilder::try_from(config)
        .expect("client builds")
        .with_layer(&layer)
        .build();
    (client, requests)
}
