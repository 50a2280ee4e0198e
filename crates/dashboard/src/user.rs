//! Who a request acts as. Every read beyond the shared cache and every
//! action is made with [`User::client`], so the API server authorizes it
//! and its audit log names the person, never a shared identity.
//!
//! Two ways to know the user ([`Acting`]):
//! - `tether dashboard`: the person who started it, through their
//!   kubeconfig (the cache is then their own watch, so it shows only what
//!   they may list);
//! - the controller's `/ui`: each request's bearer token, checked with a
//!   TokenReview, and the cache (the controller's) shown per namespace only
//!   where a SubjectAccessReview allows listing Applications.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use crate::server::Shared;

/// The person a request acts as.
#[derive(Clone)]
pub struct User {
    /// A client whose every request is made as this person.
    pub client: kube::Client,
    /// Their user name, for the page ("acting as …").
    pub name: String,
    /// Which namespaces' Applications they may see.
    pub sees: Sees,
}

/// Which cached Applications a user is shown.
#[derive(Clone)]
pub enum Sees {
    /// Everything in the cache (it was filled with their own credentials).
    AllCached,
    /// Only namespaces `may_list` allows (the controller's cache).
    Checked(Arc<dyn MayList>),
}

/// Whether a user may list Applications in a namespace (a
/// SubjectAccessReview, remembered for a while by the implementation).
pub trait MayList: Send + Sync {
    fn may_list<'a>(
        &'a self,
        namespace: &'a str,
    ) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>>;
}

impl User {
    /// Whether this user is shown the Applications of `namespace`.
    pub async fn sees(&self, namespace: &str) -> bool {
        match &self.sees {
            Sees::AllCached => true,
            Sees::Checked(check) => check.may_list(namespace).await,
        }
    }
}

/// Why a request gets nothing: 401 without a user, 403 without the right,
/// 500 when the API server could not say.
#[derive(Debug)]
pub enum Refusal {
    Unauthenticated(String),
    Forbidden(String),
    Failed(String),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (status, text) = match self {
            Refusal::Unauthenticated(text) => (StatusCode::UNAUTHORIZED, text),
            Refusal::Forbidden(text) => (StatusCode::FORBIDDEN, text),
            Refusal::Failed(text) => (StatusCode::INTERNAL_SERVER_ERROR, text),
        };
        (status, format!("{text}\n")).into_response()
    }
}

/// How the dashboard learns who a request acts as.
#[derive(Clone)]
pub enum Acting {
    /// `tether dashboard`: every request is the kubeconfig's user.
    Kubeconfig(User),
    /// The controller's `/ui`: each request proves who it is.
    Tokens(Arc<dyn Authenticate>),
}

/// Finds the user of a request from its headers (bearer token or cookie).
pub trait Authenticate: Send + Sync {
    fn user<'a>(
        &'a self,
        parts: &'a Parts,
    ) -> Pin<Box<dyn Future<Output = Result<User, Refusal>> + Send + 'a>>;
}

impl FromRequestParts<Shared> for User {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, shared: &Shared) -> Result<User, Refusal> {
        match &shared.acting {
            Acting::Kubeconfig(user) => Ok(user.clone()),
            Acting::Tokens(authenticate) => authenticate.user(parts).await,
        }
    }
}
