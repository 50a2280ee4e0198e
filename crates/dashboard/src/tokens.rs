//! Who a request to the controller's `/ui` is: the bearer token it
//! carries (`Authorization: Bearer …`, or the `tether-token` cookie that
//! the sign-in page sets), checked with a TokenReview. The user then acts
//! with a client that carries their token and nothing of the controller's,
//! and sees the Applications of a namespace only where a
//! SubjectAccessReview says they may list them. A user who may list them
//! nowhere gets nothing (403). Tokens are never logged nor kept: only
//! their SHA-256, with the verdict, for a while.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::authorization::v1::ResourceAttributes;
use maud::html;
use sha2::{Digest, Sha256};
use tether_cluster::Connection;
use tether_controller::serve::access::{token_user, user_may};

use crate::cache::Cache;
use crate::server::Shared;
use crate::user::{Authenticate, MayList, Refusal, Sees, User};

/// The cookie the sign-in page sets.
pub const COOKIE: &str = "tether-token";
/// How long a reviewed token, or an allowed namespace, is believed.
pub const ALLOWED_FOR: Duration = Duration::from_secs(60);
/// How long a refusal is believed (shorter: a binding just made should
/// not wait long).
pub const REFUSED_FOR: Duration = Duration::from_secs(10);

type Hash = [u8; 32];

/// A token's user, or why it has none, and until when that holds.
type Judged = (Result<User, String>, Instant);

/// Users by token, as the API server vouches for them.
pub struct TokenUsers {
    connection: Connection,
    reviewer: kube::Client,
    cache: Cache,
    users: Mutex<HashMap<Hash, Judged>>,
}

impl TokenUsers {
    /// Reviews tokens with `connection`'s own client, and makes each
    /// user's client from it with their token alone; `cache` holds the
    /// Applications the pages show.
    pub fn new(connection: Connection, cache: Cache) -> Result<TokenUsers, String> {
        let reviewer = connection.client().map_err(|e| e.to_string())?;
        Ok(TokenUsers {
            connection,
            reviewer,
            cache,
            users: Mutex::default(),
        })
    }

    async fn review(&self, token: &str) -> Result<Result<User, String>, Refusal> {
        let info = token_user(&self.reviewer, token)
            .await
            .map_err(|e| Refusal::Failed(format!("reviewing a token (TokenReview) failed: {e}")))?;
        let Some(info) = info else {
            return Ok(Err("the API server does not know this token".to_string()));
        };
        let name = info.username.clone().unwrap_or_default();
        let check = Arc::new(Access {
            reviewer: self.reviewer.clone(),
            info,
            kept: Mutex::default(),
        });
        // A user who may list Applications everywhere sees the whole cache.
        let sees = if check.may_list_in(None).await? {
            Sees::AllCached
        } else {
            let mut namespaces: Vec<String> = self
                .cache
                .apps()
                .await
                .state()
                .iter()
                .filter_map(|app| app.metadata.namespace.clone())
                .collect();
            namespaces.sort();
            namespaces.dedup();
            let mut any = false;
            for namespace in &namespaces {
                if check.may_list_in(Some(namespace)).await? {
                    any = true;
                    break;
                }
            }
            if !any {
                return Ok(Err(format!(
                    "forbidden: {name} may not list applications.tether.dev in any namespace"
                )));
            }
            Sees::Checked(check)
        };
        let client = self
            .connection
            .client_with_token(token)
            .map_err(|e| Refusal::Failed(format!("a client for {name}: {e}")))?;
        Ok(Ok(User { client, name, sees }))
    }
}

impl Authenticate for TokenUsers {
    fn user<'a>(
        &'a self,
        parts: &'a Parts,
    ) -> Pin<Box<dyn Future<Output = Result<User, Refusal>> + Send + 'a>> {
        Box::pin(async move {
            let Some(token) = token_of(&parts.headers) else {
                return Err(Refusal::Unauthenticated(
                    "sign in: send a bearer token (Authorization: Bearer …) or sign in at login"
                        .to_string(),
                ));
            };
            let hash: Hash = Sha256::digest(token.as_bytes()).into();
            let kept = self.users.lock().unwrap().get(&hash).cloned();
            let judged = match kept {
                Some((judged, until)) if Instant::now() < until => judged,
                _ => {
                    let judged = self.review(&token).await?;
                    let lasts = if judged.is_ok() {
                        ALLOWED_FOR
                    } else {
                        REFUSED_FOR
                    };
                    let mut users = self.users.lock().unwrap();
                    users.retain(|_, (_, until)| Instant::now() < *until);
                    users.insert(hash, (judged.clone(), Instant::now() + lasts));
                    judged
                }
            };
            judged.map_err(|why| match why.starts_with("forbidden") {
                true => Refusal::Forbidden(why),
                false => Refusal::Unauthenticated(why),
            })
        })
    }
}

/// The request's bearer token: the `Authorization` header first, then the
/// sign-in cookie.
pub fn token_of(headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|token| !token.is_empty());
    if let Some(token) = bearer {
        return Some(token.to_string());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|cookies| cookies.split(';'))
        .filter_map(|cookie| cookie.trim().split_once('='))
        .find(|(name, value)| *name == COOKIE && !value.is_empty())
        .map(|(_, value)| value.to_string())
}

/// One user's SubjectAccessReviews: may they list Applications in a
/// namespace (or everywhere)? Remembered per namespace.
struct Access {
    reviewer: kube::Client,
    info: UserInfo,
    kept: Mutex<HashMap<Option<String>, (bool, Instant)>>,
}

impl Access {
    async fn may_list_in(&self, namespace: Option<&str>) -> Result<bool, Refusal> {
        let key = namespace.map(str::to_string);
        if let Some((allowed, until)) = self.kept.lock().unwrap().get(&key)
            && Instant::now() < *until
        {
            return Ok(*allowed);
        }
        let list = ResourceAttributes {
            group: Some("tether.dev".into()),
            resource: Some("applications".into()),
            verb: Some("list".into()),
            namespace: key.clone(),
            ..ResourceAttributes::default()
        };
        let allowed = user_may(&self.reviewer, &self.info, Some(list), None)
            .await
            .map_err(|e| {
                Refusal::Failed(format!(
                    "reviewing {}'s access (SubjectAccessReview) failed: {e}",
                    self.info.username.as_deref().unwrap_or_default()
                ))
            })?;
        let lasts = if allowed { ALLOWED_FOR } else { REFUSED_FOR };
        self.kept
            .lock()
            .unwrap()
            .insert(key, (allowed, Instant::now() + lasts));
        Ok(allowed)
    }
}

impl MayList for Access {
    fn may_list<'a>(
        &'a self,
        namespace: &'a str,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>> {
        Box::pin(async move { self.may_list_in(Some(namespace)).await.unwrap_or(false) })
    }
}

/// The sign-in routes (`login`, `logout`), open to all: they only set or
/// clear the cookie; every other route checks it.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
}

async fn login_page(State(shared): State<Shared>) -> Html<String> {
    let body = html! {
        p { "The dashboard acts as you: paste a Kubernetes bearer token, for example from "
            code { "kubectl create token NAME -n NAMESPACE" } ". It is kept in a cookie of this site only (HttpOnly, SameSite=Strict) and sent to the API server with each request." }
        form #login method="post" action="login" {
            label { "Token " input type="password" name="token" autocomplete="off" required; }
            button #sign-in type="submit" { "Sign in" }
        }
    };
    Html(crate::page::layout(&shared.base, "Sign in", body).into_string())
}

async fn login(State(shared): State<Shared>, headers: HeaderMap, body: String) -> Response {
    let token = form_urlencoded::parse(body.as_bytes())
        .find(|(key, _)| key == "token")
        .map(|(_, value)| value.trim().to_string())
        .filter(|token| !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic()));
    let Some(token) = token else {
        return (StatusCode::BAD_REQUEST, "a token is required\n").into_response();
    };
    let cookie = cookie(&shared.base, &token, secure(&headers));
    ([(header::SET_COOKIE, cookie)], Redirect::to(&shared.base)).into_response()
}

async fn logout(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    let cookie = format!("{}; Max-Age=0", cookie(&shared.base, "", secure(&headers)));
    (
        [(header::SET_COOKIE, cookie)],
        Redirect::to(&format!("{}login", shared.base)),
    )
        .into_response()
}

/// Whether the browser reached us over HTTPS (a proxy in front says so).
fn secure(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|proto| proto.eq_ignore_ascii_case("https"))
}

/// The sign-in cookie: sent only to the dashboard's own paths, never to
/// scripts, never from another site.
pub fn cookie(base: &str, token: &str, secure: bool) -> String {
    let mut cookie = format!("{COOKIE}={token}; Path={base}; HttpOnly; SameSite=Strict");
    if secure {
        cookie.push_str("; Secure");
    }
    cookie
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn the_token_comes_from_the_bearer_header_then_the_cookie() {
        let mut headers = HeaderMap::new();
        assert_eq!(token_of(&headers), None);
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("theme=dark; tether-token=from-cookie"),
        );
        assert_eq!(token_of(&headers).as_deref(), Some("from-cookie"));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer from-header"),
        );
        assert_eq!(token_of(&headers).as_deref(), Some("from-header"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(token_of(&headers).as_deref(), Some("from-cookie"));
    }

    #[test]
    fn the_cookie_is_http_only_same_site_strict_and_scoped_to_the_dashboard() {
        assert_eq!(
            cookie("/ui/", "t", false),
            "tether-token=t; Path=/ui/; HttpOnly; SameSite=Strict"
        );
        assert!(cookie("/ui/", "t", true).ends_with("; Secure"));
    }
}
