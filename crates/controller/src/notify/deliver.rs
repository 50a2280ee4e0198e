//! Delivering queued messages: each in its own task, tried and retried by
//! the [`RetryPolicy`], at most [`PER_ROUTE`] requests at once to one route
//! and [`IN_FLIGHT`] in all — so a receiver that hangs holds only its own
//! lane and the others' messages go on. A Secret (credentials, or the URL
//! itself) is read when a request is built, so a rotated one applies at
//! once; its value stays in [`SecretValue`] and the request's headers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use reqwest::header::HeaderValue;
use tether_core::notice::Notice;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;

use super::request::{self, Outgoing, SecretValue};
use super::retry::{self, RetryPolicy, Verdict};
use super::route::{self, Route, SecretRef, Target};
use crate::metrics::Metrics;

/// Requests in flight to one route at most.
pub const PER_ROUTE: usize = 2;
/// Requests in flight in all at most.
pub const IN_FLIGHT: usize = 32;

/// One notice for one route, holding its place in the queue until its
/// final outcome.
pub struct Message {
    pub route: Arc<Route>,
    pub notice: Arc<Notice>,
    pub place: OwnedSemaphorePermit,
}

/// What delivering needs: the HTTP client, the controller's Secrets, the
/// policy, the metrics and the concurrency limits.
pub struct Deliverer {
    http: reqwest::Client,
    secrets: Api<Secret>,
    namespace: String,
    retry: RetryPolicy,
    metrics: Arc<Metrics>,
    in_flight: Arc<Semaphore>,
    lanes: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl Deliverer {
    /// Reads Secrets in `namespace` with `client`.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        retry: RetryPolicy,
        metrics: Arc<Metrics>,
    ) -> Deliverer {
        // No redirects: a receiver's URL is configured, and a redirect
        // would carry the body (and its signature) somewhere else.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(retry.timeout)
            .build()
            .expect("the HTTP client builds (its TLS roots load)");
        Deliverer {
            http,
            secrets: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            retry,
            metrics,
            in_flight: Arc::new(Semaphore::new(IN_FLIGHT)),
            lanes: Mutex::default(),
        }
    }

    /// Delivers every message `queue` yields, each in its own task, until
    /// every sender is gone and the last delivery has ended. Dropping the
    /// future stops the deliveries in flight.
    pub async fn run(self: Arc<Self>, mut queue: mpsc::UnboundedReceiver<Message>) {
        let mut tasks = JoinSet::new();
        loop {
            tokio::select! {
                message = queue.recv() => match message {
                    Some(message) => {
                        tasks.spawn(self.clone().deliver(message));
                    }
                    None => break,
                },
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        while tasks.join_next().await.is_some() {}
    }

    /// Tries `message` until it is delivered, refused, or out of tries;
    /// counts the outcome.
    async fn deliver(self: Arc<Self>, message: Message) {
        let Message { route, notice, .. } = &message;
        let lane = self.lane(&route.name);
        let mut tried = 0;
        let failure = loop {
            tried += 1;
            let verdict = {
                let _lane = lane.acquire().await.expect("never closed");
                let _slot = self.in_flight.acquire().await.expect("never closed");
                self.attempt(route, notice).await
            };
            match verdict {
                Verdict::Delivered => {
                    tracing::debug!(route = %route.name, event = %notice.kind,
                        app = %format!("{}/{}", notice.namespace, notice.name), tried,
                        "notification delivered");
                    self.metrics.notification_sent(true);
                    return;
                }
                Verdict::Refused(reason) => break reason,
                Verdict::Retry(reason) => match self.retry.delay_after(tried) {
                    Some(delay) => {
                        tracing::info!(route = %route.name, target = %route.shown_target(),
                            event = %notice.kind, %reason, tried, retry_in = ?delay,
                            "notification not delivered yet; retrying");
                        tokio::time::sleep(delay).await;
                    }
                    None => break format!("{reason}, after {tried} tries"),
                },
            }
        };
        tracing::warn!(route = %route.name, target = %route.shown_target(),
            event = %notice.kind, app = %format!("{}/{}", notice.namespace, notice.name),
            reason = %failure, "notification not delivered");
        self.metrics.notification_sent(false);
    }

    /// One try: read the route's Secrets, build the request, send it.
    async fn attempt(&self, route: &Route, notice: &Notice) -> Verdict {
        let url = match &route.target {
            Target::Url(url) => url.clone(),
            Target::Secret(secret) => match self.read(secret).await {
                Ok(value) => match route::http_url(&String::from_utf8_lossy(value.expose())) {
                    Ok(url) => url,
                    Err(problem) => {
                        return Verdict::Refused(format!(
                            "{}: {problem}",
                            self.secret_name(secret)
                        ));
                    }
                },
                Err(verdict) => return verdict,
            },
        };
        let secret = match &route.auth {
            Some(auth) => match self.read(&auth.secret).await {
                Ok(value) => Some(value),
                Err(verdict) => return verdict,
            },
            None => None,
        };
        self.send(request::build(route, url, notice, secret.as_ref()))
            .await
    }

    async fn send(&self, outgoing: Outgoing) -> Verdict {
        let mut request = self.http.post(outgoing.url).body(outgoing.body);
        for (name, value, sensitive) in outgoing.headers {
            let Ok(mut value) = HeaderValue::from_str(&value) else {
                return Verdict::Refused(format!("header {name}: not a valid header value"));
            };
            value.set_sensitive(sensitive);
            request = request.header(name, value);
        }
        match request.send().await {
            Ok(response) => retry::judge(response.status().as_u16()),
            Err(error) if error.is_timeout() => Verdict::Retry("timed out".to_string()),
            Err(error) => Verdict::Retry(causes(error)),
        }
    }

    /// The value of `secret`'s key; a missing Secret or key is refused, a
    /// failed read retried.
    async fn read(&self, secret: &SecretRef) -> Result<SecretValue, Verdict> {
        let name = self.secret_name(secret);
        let found = match self.secrets.get_opt(&secret.name).await {
            Ok(found) => found,
            Err(kube::Error::Api(status)) if status.code == 403 => {
                return Err(Verdict::Refused(format!(
                    "{name}: forbidden: {}",
                    status.message
                )));
            }
            Err(error) => return Err(Verdict::Retry(format!("{name}: reading it: {error}"))),
        };
        let Some(found) = found else {
            return Err(Verdict::Refused(format!("{name}: not found")));
        };
        let bytes = found
            .string_data
            .as_ref()
            .and_then(|data| data.get(&secret.key))
            .map(|text| text.as_bytes().to_vec())
            .or_else(|| {
                found
                    .data
                    .as_ref()
                    .and_then(|data| data.get(&secret.key))
                    .map(|bytes| bytes.0.clone())
            });
        match bytes.map(|bytes| SecretValue::new(&bytes)) {
            Some(value) if !value.is_empty() => Ok(value),
            _ => Err(Verdict::Refused(format!(
                "{name}: key {} is missing or empty",
                secret.key
            ))),
        }
    }

    fn secret_name(&self, secret: &SecretRef) -> String {
        format!("Secret {}/{}", self.namespace, secret.name)
    }

    fn lane(&self, route: &str) -> Arc<Semaphore> {
        let mut lanes = self.lanes.lock().expect("lock");
        lanes
            .entry(route.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(PER_ROUTE)))
            .clone()
    }
}

/// `error` and its causes in one line (`error sending request: client
/// error (Connect): tcp connect error: Connection refused …`), without the
/// URL: it may hold a token.
fn causes(error: reqwest::Error) -> String {
    tether_core::error_text::one_line(&error.without_url())
}
