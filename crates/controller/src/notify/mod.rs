//! Notifications: delivering [`Notice`]s to webhooks — chat, incident
//! tools, anything that takes an HTTP POST — asynchronously, so the loop
//! that produces them is never slowed nor failed by a receiver.
//!
//! [`Notifier::notify`] matches the notice against the routes and queues
//! one message per route that wants it, never waiting: when the queue
//! (messages not yet delivered, retries included) is full the message is
//! dropped and counted (`tether_notifications_dropped_total`). Each
//! message is then tried until delivered, refused (a 4xx other than 429)
//! or out of tries ([`RetryPolicy`]); the outcome is counted in
//! `tether_notifications_sent_total{result="delivered"|"failed"}`.
//!
//! # Routes
//!
//! Each `tether run --notify-webhook URL` is a route `notify-webhook-N`
//! for every event of every Application, as `json`, unauthenticated.
//! More routes live in the ConfigMap [`ROUTES_CONFIGMAP`] in the
//! controller's namespace, watched (an edit applies without a restart).
//! Every data key (say `routes.yaml`) holds a YAML list of routes:
//!
//! ```yaml
//! - name: payments-oncall          # unique; logs name the route by it
//!   url: https://events.example.com/tether   # or urlSecretRef: {name, key}
//!   events: [sync-failed, not-synced-too-long]   # event words, or ["*"]
//!   selector:                      # optional: which Applications
//!     namespaces: [shop]           #   in these namespaces (default: any)
//!     matchLabels: {team: payments}   # and a label selector, as Kubernetes
//!     matchExpressions:            #   has it (In, NotIn, Exists, DoesNotExist)
//!       - {key: tier, operator: In, values: [prod]}
//!   format: json                   # json (default) | slack
//!   auth: hmac                     # bearer | hmac, with secretRef
//!   secretRef: {name: tether-notify, key: signing-key}
//! ```
//!
//! A route whose URL is itself a credential (a Slack incoming webhook's
//! is) names it in `urlSecretRef` instead of `url`. Secrets are read from
//! the controller's namespace when sending; a value's surrounding
//! whitespace is dropped. `auth: bearer` sends `Authorization: Bearer
//! <secret>`; `auth: hmac` sends `X-Tether-Signature: sha256=<hex>`, the
//! HMAC-SHA256 of the body under the secret, as GitHub signs webhooks. A
//! route that does not parse (an unknown event word, a bad selector, no
//! URL, …) is left out and logged naming the ConfigMap, key, line and
//! route ([`Notifier::problems`]); the others still work.
//!
//! # Requests
//!
//! `POST` with the body in the route's format ([`payload`]) and headers
//! `Content-Type: application/json`, `Idempotency-Key` (the notice's key:
//! the same on every retry, for a receiver to de-duplicate), and
//! `X-Tether-Event` (the event word). Each request may take
//! [`RetryPolicy::timeout`]; redirects are not followed. 5xx, 429, timeouts
//! and connection failures are retried. Logs name the route and show only
//! the URL's scheme, host and port — never its path, query or a Secret.

pub mod deliver;
pub mod payload;
pub mod request;
pub mod retry;
pub mod route;
pub mod selector;
pub mod table;
pub mod watch;

use std::sync::Arc;

use tether_core::notice::Notice;
use tokio::sync::{Semaphore, mpsc};

use crate::metrics::Metrics;
pub use retry::RetryPolicy;

use deliver::{Deliverer, Message};
use table::RouteTable;

/// The ConfigMap holding notification routes, in the controller's namespace.
pub const ROUTES_CONFIGMAP: &str = "tether-notifications";

/// How notifications are sent.
#[derive(Debug, Clone)]
pub struct NotifyConfig {
    /// `--notify-webhook` URLs, in order.
    pub webhooks: Vec<String>,
    /// The controller's namespace: the routes ConfigMap and the Secrets
    /// routes name are read there.
    pub namespace: String,
    pub retry: RetryPolicy,
    /// Messages queued or being tried at most; more are dropped.
    pub queue: usize,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        NotifyConfig {
            webhooks: Vec::new(),
            namespace: "tether-system".to_string(),
            retry: RetryPolicy::default(),
            queue: 1000,
        }
    }
}

/// The handle the controller notifies through; cheap to clone.
#[derive(Clone, Default)]
pub struct Notifier {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    routes: Arc<RouteTable>,
    places: Arc<Semaphore>,
    queue: mpsc::UnboundedSender<Message>,
    metrics: Arc<Metrics>,
}

impl Notifier {
    /// A notifier for `config`, and the future that watches the routes
    /// ConfigMap and delivers (spawn it; it ends once every `Notifier`
    /// clone is dropped and the last delivery has ended).
    pub fn start(
        client: kube::Client,
        config: NotifyConfig,
        metrics: Arc<Metrics>,
    ) -> (Notifier, impl Future<Output = ()> + Send + 'static) {
        let routes = Arc::new(RouteTable::new(&config.webhooks));
        let (sender, receiver) = mpsc::unbounded_channel();
        let deliverer = Arc::new(Deliverer::new(
            client.clone(),
            &config.namespace,
            config.retry,
            metrics.clone(),
        ));
        let watched = routes.clone();
        let work = async move {
            let watch = watch::watch_routes(client, &config.namespace, ROUTES_CONFIGMAP, watched);
            tokio::select! {
                () = deliverer.run(receiver) => {}
                () = watch => {}
            }
        };
        let notifier = Notifier {
            inner: Some(Arc::new(Inner {
                routes,
                places: Arc::new(Semaphore::new(config.queue)),
                queue: sender,
                metrics,
            })),
        };
        (notifier, work)
    }

    /// A notifier that sends nothing.
    pub fn disabled() -> Notifier {
        Notifier { inner: None }
    }

    /// Queues `notice` for every route that wants it. Never waits and
    /// never fails: a message that finds the queue full is dropped, counted
    /// and logged.
    pub fn notify(&self, notice: Notice) {
        let Some(inner) = &self.inner else {
            return;
        };
        let routes = inner.routes.matching(&notice);
        if routes.is_empty() {
            return;
        }
        let notice = Arc::new(notice);
        for route in routes {
            let queued = match inner.places.clone().try_acquire_owned() {
                Ok(place) => inner
                    .queue
                    .send(Message {
                        route: route.clone(),
                        notice: notice.clone(),
                        place,
                    })
                    .is_ok(),
                Err(_) => false,
            };
            if !queued {
                inner.metrics.notification_dropped();
                tracing::warn!(route = %route.name, event = %notice.kind,
                    app = %format!("{}/{}", notice.namespace, notice.name),
                    "notification queue full (or stopped); notification dropped");
            }
        }
    }

    /// The names of the routes in force (`--notify-webhook` routes first).
    pub fn routes(&self) -> Vec<String> {
        self.inner
            .as_ref()
            .map(|inner| inner.routes.names())
            .unwrap_or_default()
    }

    /// Why routes were left out, each naming the route and where it is
    /// written (`ConfigMap tether-system/tether-notifications key
    /// routes.yaml line 3: route "pager": events: …`).
    pub fn problems(&self) -> Vec<String> {
        self.inner
            .as_ref()
            .map(|inner| inner.routes.problems())
            .unwrap_or_default()
    }
}
