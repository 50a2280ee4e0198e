//! The HTTP side: the overview page, its live part, the change stream and
//! the embedded assets, all served from the [`Cache`].

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::extract::{Query as QueryParams, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use futures::Stream;
use tether_controller::api::Application;
use tokio::sync::broadcast;

use crate::cache::Cache;
use crate::overview::{Query, QueryError, Row, View};
use crate::page::{self, Overview};
use crate::user::{Acting, User};

/// What every route is served from: the cache of Applications, and how a
/// request learns whom it acts as.
#[derive(Clone)]
pub struct Shared {
    pub cache: Cache,
    pub acting: Acting,
    /// Where the routes are mounted, ending in `/` (`/`, or `/ui/` in the
    /// controller): every page links relative to it.
    pub base: String,
}

/// The dashboard's routes:
///
/// - `GET /`: the overview (`?q=&state=&sync=&health=&sort=`), server-rendered;
/// - `GET /live`: its live part (headline, matrix, table) for the same query;
/// - `GET /events`: a server-sent `change` event whenever an Application changes;
/// - `GET /assets/dashboard.css`, `/assets/live.js`: embedded in the binary;
/// - `GET /healthz`: `ok`.
pub fn app(shared: Shared) -> Router {
    routes().with_state(shared)
}

/// The routes of [`app`], before their state is given.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/", get(overview))
        .route("/live", get(live))
        .route("/events", get(events))
        .route("/apps/{ns}/{name}", get(crate::app::show))
        .route("/apps/{ns}/{name}/live", get(crate::app::live))
        .route("/break-glass", get(crate::windows::list))
        .route("/break-glass/live", get(crate::windows::list_live))
        .route("/break-glass/{ns}/{name}", get(crate::windows::window))
        .route(
            "/break-glass/{ns}/{name}/live",
            get(crate::windows::window_live),
        )
        .route("/healthz", get(|| async { "ok" }))
        .merge(crate::actions::routes())
        .route(
            "/assets/dashboard.css",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
                    page::STYLE,
                )
            }),
        )
        .route(
            "/assets/live.js",
            get(|| async {
                (
                    [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
                    page::SCRIPT,
                )
            }),
        )
}

/// A request the dashboard cannot answer as asked.
struct BadQuery(QueryError);

impl IntoResponse for BadQuery {
    fn into_response(self) -> Response {
        (StatusCode::BAD_REQUEST, format!("{}\n", self.0)).into_response()
    }
}

async fn overview(
    State(shared): State<Shared>,
    user: User,
    QueryParams(query): QueryParams<Query>,
) -> Result<Html<String>, BadQuery> {
    render(&shared, &user, &query, page::page).await
}

async fn live(
    State(shared): State<Shared>,
    user: User,
    QueryParams(query): QueryParams<Query>,
) -> Result<Html<String>, BadQuery> {
    render(&shared, &user, &query, page::live).await
}

/// `markup` of the cached Applications `user` may see, for `query`. An
/// Application that does not decode is left out (the controller reports
/// it in its status).
async fn render(
    shared: &Shared,
    user: &User,
    query: &Query,
    markup: fn(&Overview) -> maud::Markup,
) -> Result<Html<String>, BadQuery> {
    let view = View::parse(query).map_err(BadQuery)?;
    let stored = shared.cache.apps().await.state();
    let mut apps: Vec<&Application> = Vec::with_capacity(stored.len());
    for app in stored.iter().filter_map(|app| app.decoded.as_deref().ok()) {
        if user
            .sees(app.metadata.namespace.as_deref().unwrap_or_default())
            .await
        {
            apps.push(app);
        }
    }
    let rows: Vec<Row> = apps.iter().map(|app| Row::of(app)).collect();
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let overview = Overview {
        rows: &rows,
        view: &view,
        now: &now,
        scope: &shared.cache.scope,
        base: &shared.base,
    };
    Ok(Html(markup(&overview).into_string()))
}

/// The least time between two `change` events to one browser: a burst of
/// changes (a commit syncing hundreds of apps) becomes one refetch per
/// [`EVENT_SPACING`], not one per app.
pub const EVENT_SPACING: Duration = Duration::from_millis(200);

/// A `change` event when the cache changes: at once after a quiet spell,
/// otherwise [`EVENT_SPACING`] after the last one, for all the changes
/// made meanwhile. A browser that fell behind gets one event for all it
/// missed.
async fn events(
    State(shared): State<Shared>,
    _user: User,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let changes = shared.cache.subscribe().await;
    let stream = futures::stream::unfold((changes, None), |(mut changes, last)| async move {
        if let Err(broadcast::error::RecvError::Closed) = changes.recv().await {
            return None;
        }
        if let Some(last) = last {
            tokio::time::sleep_until(last + EVENT_SPACING).await;
        }
        // The changes made while waiting are told by this one event.
        while !matches!(
            changes.try_recv(),
            Err(broadcast::error::TryRecvError::Empty | broadcast::error::TryRecvError::Closed)
        ) {}
        // Browsers drop an event whose data is empty (the EventSource
        // processing model): it must say something.
        let event = Event::default().event("change").data("applications");
        Some((Ok(event), (changes, Some(tokio::time::Instant::now()))))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use crate::cache::Keep;
    use crate::cache::tests::{listing, stored};

    use crate::user::Sees;

    /// A cache holding Applications `names` of namespace `shop`, all
    /// Converged except `broken`.
    fn cache_of(names: &[&str]) -> Cache {
        listing(
            names.iter().map(|name| stored(name)).collect(),
            Keep::Always,
        )
    }

    /// A user whose client points nowhere: these routes read the cache only.
    pub(crate) fn nobody() -> User {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        User {
            client: kube::Client::try_from(config).unwrap(),
            name: "tester".to_string(),
            sees: Sees::AllCached,
        }
    }

    async fn get_text(cache: Cache, uri: &str) -> (StatusCode, String) {
        let acting = Acting::Kubeconfig(nobody());
        let response = app(Shared {
            cache,
            acting,
            base: "/".to_string(),
        })
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn the_overview_lists_the_cached_apps_worst_first() {
        let (status, html) = get_text(cache_of(&["web", "broken"]), "/").await;
        assert_eq!(status, StatusCode::OK);
        let broken = html.find(">broken<").expect("broken is listed");
        let web = html.find(">web<").expect("web is listed");
        assert!(broken < web, "{html}");
        assert!(html.contains("Applications (2 of 2)"), "{html}");
        assert!(html.contains("<base href=\"/\">"), "{html}");
        assert!(html.contains("href=\"assets/dashboard.css\""), "{html}");
    }

    #[tokio::test]
    async fn the_live_part_follows_the_query_and_a_bad_word_is_a_400_that_names_it() {
        let cache = cache_of(&["web", "broken"]);
        let (status, html) = get_text(cache.clone(), "/live?state=Converged").await;
        assert_eq!(status, StatusCode::OK);
        assert!(html.starts_with("<main id=\"live\""), "{html}");
        assert!(
            html.contains(">web<") && !html.contains(">broken<"),
            "{html}"
        );
        let (status, text) = get_text(cache, "/?state=Fine").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(text.contains("\"Fine\""), "{text}");
    }

    #[tokio::test]
    async fn the_assets_and_health_are_served_from_the_binary() {
        let (status, css) = get_text(cache_of(&[]), "/assets/dashboard.css").await;
        assert_eq!(status, StatusCode::OK);
        assert!(css.contains("prefers-color-scheme: dark"));
        let (_, script) = get_text(cache_of(&[]), "/assets/live.js").await;
        assert!(script.contains("new EventSource(\"events\")"));
        assert_eq!(get_text(cache_of(&[]), "/healthz").await.1, "ok");
    }

    #[tokio::test]
    async fn a_burst_of_changes_reaches_a_browser_as_two_events() {
        use futures::StreamExt;
        let cache = cache_of(&["web"]);
        let told = cache.clone();
        let acting = Acting::Kubeconfig(nobody());
        let shared = Shared {
            cache,
            acting,
            base: "/".to_string(),
        };
        let response = app(shared)
            .oneshot(Request::get("/events").body(Body::empty()).unwrap())
            .await
            .unwrap();
        let mut body = response.into_body().into_data_stream();
        told.tell();
        let first = body.next().await.unwrap().unwrap();
        assert!(String::from_utf8_lossy(&first).contains("event: change"));
        let told_first = tokio::time::Instant::now();
        for _ in 0..49 {
            told.tell();
        }
        let mut told = 1;
        let quiet = told_first + 3 * EVENT_SPACING;
        while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(quiet, body.next()).await {
            let events = String::from_utf8_lossy(&frame)
                .matches("event: change")
                .count();
            if events > 0 {
                assert!(told_first.elapsed() >= EVENT_SPACING);
            }
            told += events;
        }
        // The first change at once; the 49 after it in one event, a spacing later.
        assert_eq!(told, 2);
    }
}
