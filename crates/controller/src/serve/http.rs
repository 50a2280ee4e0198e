//! The controller's HTTP endpoints: Git push webhooks, and the probes.
//!
//! `GET /healthz` (liveness) and `GET /readyz` (readiness) answer 200 `ok`
//! while the controller can list and watch its Applications, and 503 with
//! the reason when it cannot ([`Probe`]); `/readyz` also waits for the
//! first complete list.
//!
//! `POST /webhook/{provider}` (github, gitlab, gitea, forgejo) verifies the
//! event with the shared secret ([`tether_source::webhook::parse_push`]) and
//! wakes every Application using the pushed repository ([`Trigger`]). It
//! answers 202 with how many were woken, 200 `duplicate delivery` for a
//! verified push seen before (a retry or a replay: nothing is woken, see
//! [`crate::serve::replay`]), 401 on a bad signature or token (changing nothing),
//! 400 on an unreadable event, and 202 for events that are not pushes.
//! Without a configured secret there is no webhook route: an unverified
//! push is never accepted.
//!
//! `GET /metrics` ([`metrics`]) answers the Prometheus exposition to a
//! bearer token the API server vouches for and allows `get` on the
//! non-resource URL `/metrics` ([`Access`]): 401 without a token or with
//! one it does not know, 403 without the right, 500 when it cannot tell.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tether_source::webhook::{WebhookError, parse_push};

use crate::metrics::Metrics;
use crate::serve::access::{self, Access};
use crate::serve::probe::{Probe, Verdict};
use crate::serve::replay::Deliveries;
use crate::serve::trigger::Trigger;

const PROVIDERS: [&str; 4] = ["github", "gitlab", "gitea", "forgejo"];

#[derive(Clone)]
struct Webhooks {
    trigger: Trigger,
    secret: Arc<Vec<u8>>,
    deliveries: Arc<Mutex<Deliveries>>,
}

/// The routes: `/healthz` and `/readyz` from `probe`, and
/// `/webhook/{provider}` when `secret` is set.
pub fn app(trigger: Trigger, probe: Probe, secret: Option<Vec<u8>>) -> Router {
    let health = Router::new()
        .route(
            "/healthz",
            get(|State(probe): State<Probe>| async move { answer(probe.live()) }),
        )
        .route(
            "/readyz",
            get(|State(probe): State<Probe>| async move { answer(probe.ready()) }),
        )
        .with_state(probe);
    match secret {
        Some(secret) => Router::new()
            .route("/webhook/{provider}", post(webhook))
            .with_state(Webhooks {
                trigger,
                secret: Arc::new(secret),
                deliveries: Arc::default(),
            })
            .merge(health),
        None => health,
    }
}

/// The content type of [`Metrics::encode`]'s text (OpenMetrics).
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone)]
struct Scrapes {
    metrics: Arc<Metrics>,
    access: Access,
}

/// The route `GET /metrics`: `metrics` for whoever `access` allows.
pub fn metrics(metrics: Arc<Metrics>, access: Access) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(Scrapes { metrics, access })
}

async fn scrape(State(scrapes): State<Scrapes>, headers: HeaderMap) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
    match scrapes.access.judge(token).await {
        Ok(access::Verdict::Allowed) => (
            [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
            scrapes.metrics.encode(),
        )
            .into_response(),
        Ok(access::Verdict::Unauthenticated) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "Unauthorized: a bearer token the API server knows is required\n",
        )
            .into_response(),
        Ok(access::Verdict::Forbidden(user)) => {
            tracing::debug!(%user, "refused /metrics: no get on the non-resource URL /metrics");
            (
                StatusCode::FORBIDDEN,
                format!("Forbidden: {user} may not get /metrics (bind the ClusterRole tether-metrics-reader)\n"),
            )
                .into_response()
        }
        Err(error) => {
            tracing::warn!(%error, "cannot tell who may read /metrics");
            (StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n")).into_response()
        }
    }
}

fn answer(verdict: Verdict) -> (StatusCode, String) {
    match verdict {
        Verdict::Ok => (StatusCode::OK, "ok".into()),
        Verdict::Starting => (StatusCode::SERVICE_UNAVAILABLE, "starting".into()),
        Verdict::Failing(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason),
    }
}

/// Serves `router` on `addr` until the task is dropped.
pub async fn serve(addr: SocketAddr, router: Router) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving HTTP");
    axum::serve(listener, router).await
}

async fn webhook(
    State(hooks): State<Webhooks>,
    Path(provider): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<(StatusCode, String), Rejection> {
    if !PROVIDERS.contains(&provider.as_str()) {
        return Err(Rejection::UnknownProvider(provider));
    }
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string)
    };
    let push = parse_push(header, &body, &hooks.secret).map_err(Rejection::Webhook)?;
    // Only a verified push is remembered: unsigned requests cannot fill
    // the memory.
    let replayed = hooks
        .deliveries
        .lock()
        .expect("lock")
        .replayed(&push, Instant::now());
    if let Some(key) = replayed {
        tracing::info!(git_ref = %push.git_ref, %key, "duplicate push webhook ignored");
        return Ok((
            StatusCode::OK,
            format!("duplicate delivery ({key}); nothing woken\n"),
        ));
    }
    let woken = hooks
        .trigger
        .repository(&push.repo_urls, push.changed_paths.as_deref());
    tracing::info!(git_ref = %push.git_ref, now = woken.now, later = woken.later, "push webhook");
    let message = match woken.later {
        0 => format!("woke {} application(s)\n", woken.now),
        later => format!(
            "woke {} application(s) the push can affect; {later} other(s) in {}s\n",
            woken.now,
            crate::serve::trigger::UNAFFECTED_DELAY.as_secs()
        ),
    };
    Ok((StatusCode::ACCEPTED, message))
}

/// Why a webhook request was not acted on.
enum Rejection {
    UnknownProvider(String),
    Webhook(WebhookError),
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            Rejection::UnknownProvider(provider) => (
                StatusCode::NOT_FOUND,
                format!("unknown webhook provider {provider:?}; one of {PROVIDERS:?}"),
            ),
            Rejection::Webhook(error) => {
                let status = match &error {
                    WebhookError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
                    WebhookError::Ignored { .. } => StatusCode::ACCEPTED,
                    WebhookError::BadRequest(_) => StatusCode::BAD_REQUEST,
                };
                (status, error.to_string())
            }
        };
        (status, format!("{message}\n")).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::StoredApplication;
    use axum::body::Body;
    use axum::http::Request;
    use hmac::{Hmac, Mac};
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;
    use serde_json::json;
    use sha2::Sha256;
    use tokio::sync::mpsc;
    use tower::ServiceExt;

    const SECRET: &[u8] = b"s3cret";

    fn wired() -> (
        Trigger,
        mpsc::UnboundedReceiver<crate::observe::live::AppKey>,
    ) {
        let mut writer = Writer::<StoredApplication>::default();
        let app = StoredApplication::decode(&json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"source": {"repoURL": "https://github.com/shop/site.git", "path": "app"},
                     "destination": {"namespace": "shop"}}
        }));
        writer.apply_watcher_event(&watcher::Event::Apply(app));
        let trigger = Trigger::default();
        let (wake, woken) = mpsc::unbounded_channel();
        trigger.wire(writer.as_reader(), wake);
        (trigger, woken)
    }

    fn push(signature_secret: &[u8]) -> Request<Body> {
        delivery(signature_secret, "d-1", "b0c1")
    }

    /// A signed push of commit `after` as delivery `id`.
    fn delivery(signature_secret: &[u8], id: &str, after: &str) -> Request<Body> {
        let body = format!(
            r#"{{"ref":"refs/heads/main","before":"a0b1","after":"{after}","repository":{{"clone_url":"https://github.com/shop/site.git"}}}}"#
        );
        let mut mac = Hmac::<Sha256>::new_from_slice(signature_secret).unwrap();
        mac.update(body.as_bytes());
        let signature = hex::encode(mac.finalize().into_bytes());
        Request::post("/webhook/github")
            .header("X-GitHub-Event", "push")
            .header("X-GitHub-Delivery", id)
            .header("X-Hub-Signature-256", format!("sha256={signature}"))
            .body(Body::from(body))
            .unwrap()
    }

    /// Sends `request` to a router whose webhook secret is `secret`: the
    /// answer's status, and the app it woke, if any.
    async fn answer(
        secret: Option<&[u8]>,
        request: Request<Body>,
    ) -> (StatusCode, Option<crate::observe::live::AppKey>) {
        let (trigger, mut woken) = wired();
        let response = app(trigger, Probe::default(), secret.map(<[u8]>::to_vec))
            .oneshot(request)
            .await
            .unwrap();
        (response.status(), woken.try_recv().ok())
    }

    #[tokio::test]
    async fn a_signed_push_wakes_the_apps_of_its_repository() {
        let web = ("shop".to_string(), "web".to_string());
        assert_eq!(
            answer(Some(SECRET), push(SECRET)).await,
            (StatusCode::ACCEPTED, Some(web))
        );
    }

    #[tokio::test]
    async fn a_forged_push_is_unauthorized_and_wakes_nothing() {
        assert_eq!(
            answer(Some(SECRET), push(b"guess")).await,
            (StatusCode::UNAUTHORIZED, None)
        );
    }

    #[tokio::test]
    async fn a_replayed_webhook_triggers_nothing() {
        let (trigger, mut woken) = wired();
        let router = app(trigger, Probe::default(), Some(SECRET.to_vec()));
        let first = router.clone().oneshot(push(SECRET)).await.unwrap();
        assert_eq!(first.status(), StatusCode::ACCEPTED);
        assert_eq!(woken.try_recv().unwrap(), ("shop".into(), "web".into()));
        // The very same request again, and the same push under a new
        // delivery id: answered, acknowledged as duplicates, nothing woken.
        for replay in [push(SECRET), delivery(SECRET, "d-2", "b0c1")] {
            let response = router.clone().oneshot(replay).await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let body = axum::body::to_bytes(response.into_body(), 1024)
                .await
                .unwrap();
            let body = String::from_utf8_lossy(&body);
            assert!(body.starts_with("duplicate delivery"), "{body}");
            assert!(woken.try_recv().is_err());
        }
        // A new commit is a new push.
        let next = router
            .clone()
            .oneshot(delivery(SECRET, "d-3", "c1d2"))
            .await
            .unwrap();
        assert_eq!(next.status(), StatusCode::ACCEPTED);
        assert!(woken.try_recv().is_ok());
    }

    #[tokio::test]
    async fn an_oversized_webhook_body_is_refused_and_wakes_nothing() {
        // Signed, so only the size can refuse it: 3 MB of padding inside a
        // valid push, over axum's 2 MB body limit.
        let padding = "x".repeat(3 * 1024 * 1024);
        let body = format!(
            r#"{{"ref":"refs/heads/main","pad":"{padding}","repository":{{"clone_url":"https://github.com/shop/site.git"}}}}"#
        );
        let mut mac = Hmac::<Sha256>::new_from_slice(SECRET).unwrap();
        mac.update(body.as_bytes());
        let signature = hex::encode(mac.finalize().into_bytes());
        let request = Request::post("/webhook/github")
            .header("X-GitHub-Event", "push")
            .header("X-Hub-Signature-256", format!("sha256={signature}"))
            .body(Body::from(body))
            .unwrap();
        assert_eq!(
            answer(Some(SECRET), request).await,
            (StatusCode::PAYLOAD_TOO_LARGE, None)
        );
    }

    #[tokio::test]
    async fn a_webhook_for_an_unknown_provider_is_refused() {
        let mut request = push(SECRET);
        *request.uri_mut() = "/webhook/bitbucket".parse().unwrap();
        assert_eq!(
            answer(Some(SECRET), request).await,
            (StatusCode::NOT_FOUND, None)
        );
    }

    #[tokio::test]
    async fn without_a_secret_there_is_no_webhook_route() {
        assert_eq!(answer(None, push(b"")).await, (StatusCode::NOT_FOUND, None));
    }

    #[tokio::test]
    async fn the_probes_fail_while_the_application_watch_fails() {
        let probe = Probe::default();
        let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
        let router = || app(Trigger::default(), probe.clone(), None);
        let status = |response: Response| response.status();
        assert_eq!(
            status(router().oneshot(get("/healthz")).await.unwrap()),
            StatusCode::OK
        );
        let starting = router().oneshot(get("/readyz")).await.unwrap();
        assert_eq!(starting.status(), StatusCode::SERVICE_UNAVAILABLE);
        probe.watch_ok(true);
        assert_eq!(
            status(router().oneshot(get("/readyz")).await.unwrap()),
            StatusCode::OK
        );
        probe.watch_failed("Application tenant/bad: spec.source.path: invalid type");
        for path in ["/healthz", "/readyz"] {
            let response = router().oneshot(get(path)).await.unwrap();
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "{path}");
        }
    }
}
