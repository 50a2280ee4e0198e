//! The actions' routes without a cluster: a form is refused before
//! anything is asked of the API server (whose address here answers
//! nothing, so a request made would be a 500, not these answers).

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use tower::ServiceExt;

use crate::cache::Keep;
use crate::cache::tests::listing;
use crate::server::{Shared, app};
use crate::user::Acting;

use crate::server::tests::nobody;

fn shared() -> Shared {
    Shared {
        cache: listing(vec![], Keep::Always),
        acting: Acting::Kubeconfig(nobody()),
        base: "/".to_string(),
    }
}

async fn send(request: Request<Body>) -> (StatusCode, Option<String>, String) {
    let response = app(shared()).oneshot(request).await.unwrap();
    let status = response.status();
    let location = response
        .headers()
        .get(header::LOCATION)
        .map(|l| l.to_str().unwrap().to_string());
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, location, String::from_utf8(body.to_vec()).unwrap())
}

fn post(uri: &str, form: &str) -> Request<Body> {
    Request::post(uri)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::from(form.to_string()))
        .unwrap()
}

#[tokio::test]
async fn a_post_without_a_token_is_a_403_and_nothing_is_asked() {
    for uri in [
        "/apps/shop/web/sync",
        "/apps/shop/web/dry-run",
        "/apps/shop/web/refresh",
        "/apps/shop/web/break-glass",
        "/break-glass/shop/w/extend",
        "/break-glass/shop/w/close",
        "/break-glass/shop/w/adopt",
    ] {
        let (status, _, html) = send(post(uri, "reason=INC-1")).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{uri}: {html}");
        assert!(html.contains("no CSRF token"), "{uri}: {html}");
        let empty = Request::post(uri).body(Body::empty()).unwrap();
        assert_eq!(send(empty).await.0, StatusCode::FORBIDDEN, "{uri}");
    }
}

#[tokio::test]
async fn a_post_with_another_users_token_is_a_403_that_names_the_user() {
    let token = super::csrf::token("mallory");
    let (status, _, html) = send(post("/apps/shop/web/sync", &format!("token={token}"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        html.contains("is not tester&#39;s") || html.contains("is not tester's"),
        "{html}"
    );
}

#[tokio::test]
async fn an_empty_reason_is_refused_before_any_window_is_asked_for() {
    let token = super::csrf::token("tester");
    let form = format!("token={token}&reason=+&scope=&duration=1h");
    let (status, _, html) = send(post("/apps/shop/web/break-glass", &form)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(html.contains("needs a reason"), "{html}");
    let form = format!("token={token}&reason=INC-1&duration=48h");
    let (status, _, html) = send(post("/apps/shop/web/break-glass", &form)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(html.contains("duration"), "{html}");
}

#[tokio::test]
async fn a_confirmation_page_says_who_acts_and_holds_the_users_token() {
    let (status, _, html) = send(
        Request::get("/apps/shop/web/sync")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("<strong>tester</strong>"), "{html}");
    assert!(html.contains(&super::csrf::token("tester")), "{html}");
    assert!(html.contains("id=\"confirm\""), "{html}");
    assert!(html.contains("action=\"apps/shop/web/sync\""), "{html}");
    let (_, _, html) = send(
        Request::get("/apps/shop/web/break-glass")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert!(html.contains("id=\"open-window\""), "{html}");
    assert!(html.contains("name=\"reason\" required"), "{html}");
}

#[tokio::test]
async fn an_api_server_that_cannot_be_reached_is_said_after_the_object() {
    let token = super::csrf::token("tester");
    let (status, _, html) = send(post("/apps/shop/web/sync", &format!("token={token}"))).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{html}");
    assert!(html.contains("Application shop/web"), "{html}");
}
