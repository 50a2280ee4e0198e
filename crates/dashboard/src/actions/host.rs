//! The DNS-rebinding guard of `tether dashboard`: a page of another site
//! whose name is made to resolve to 127.0.0.1 reaches the dashboard with
//! its own name in `Host`. Only requests naming the address the dashboard
//! serves (or `localhost` on a loopback or unspecified address) are
//! answered; the others get a 403 that says why.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Whether a request whose `Host` header is `host` is for the dashboard
/// listening on `served`.
pub fn allowed(host: Option<&str>, served: SocketAddr) -> bool {
    let Some(host) = host else {
        return false;
    };
    let Some((name, port)) = host.rsplit_once(':') else {
        return false;
    };
    if port.parse::<u16>().ok() != Some(served.port()) {
        return false;
    }
    let name = name.trim_start_matches('[').trim_end_matches(']');
    match name.parse::<IpAddr>() {
        Ok(ip) => ip == served.ip() || served.ip().is_unspecified(),
        Err(_) => {
            name.eq_ignore_ascii_case("localhost")
                && (served.ip().is_loopback() || served.ip().is_unspecified())
        }
    }
}

/// The middleware: `axum::middleware::from_fn_with_state(served, guard)`.
pub async fn guard(State(served): State<SocketAddr>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok());
    if allowed(host, served) {
        return next.run(request).await;
    }
    let text = format!(
        "forbidden: Host {:?} is not this dashboard's address {served} (refused as a possible DNS rebinding)\n",
        host.unwrap_or_default()
    );
    (StatusCode::FORBIDDEN, text).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt;

    fn at(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn the_served_address_and_localhost_on_loopback_are_allowed() {
        let served = at("127.0.0.1:8080");
        assert!(allowed(Some("127.0.0.1:8080"), served));
        assert!(allowed(Some("localhost:8080"), served));
        assert!(allowed(Some("LOCALHOST:8080"), served));
        assert!(allowed(Some("[::1]:8080"), at("[::1]:8080")));
    }

    #[test]
    fn another_name_another_port_or_no_host_is_refused() {
        let served = at("127.0.0.1:8080");
        assert!(!allowed(Some("evil.example:8080"), served));
        assert!(!allowed(Some("127.0.0.1:8081"), served));
        assert!(!allowed(Some("127.0.0.1"), served));
        assert!(!allowed(Some("10.0.0.5:8080"), served));
        assert!(!allowed(None, served));
        assert!(!allowed(Some("localhost:8080"), at("10.0.0.5:8080")));
    }

    #[test]
    fn an_unspecified_address_allows_any_ip_literal_but_no_other_name() {
        let served = at("0.0.0.0:8080");
        assert!(allowed(Some("10.0.0.5:8080"), served));
        assert!(allowed(Some("localhost:8080"), served));
        assert!(!allowed(Some("rebound.example:8080"), served));
    }

    #[tokio::test]
    async fn the_middleware_answers_a_foreign_host_with_a_403_that_says_why() {
        let app = Router::new().route("/", get(|| async { "page" })).layer(
            axum::middleware::from_fn_with_state(at("127.0.0.1:8080"), guard),
        );
        let ask = |host: &'static str| {
            let request = Request::get("/")
                .header(header::HOST, host)
                .body(Body::empty())
                .unwrap();
            app.clone().oneshot(request)
        };
        let refused = ask("evil.example:8080").await.unwrap();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        let body = axum::body::to_bytes(refused.into_body(), usize::MAX)
            .await
            .unwrap();
        assert!(String::from_utf8_lossy(&body).contains("DNS rebinding"));
        assert_eq!(
            ask("127.0.0.1:8080").await.unwrap().status(),
            StatusCode::OK
        );
    }
}
