//! What every action request carries: whom it acts as and which object
//! (`…/{ns}/{name}/…`), and for a POST the form, whose token must be the
//! user's before anything is done; and the two answers every action gives,
//! its confirmation page and its outcome.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use maud::Markup;

use super::failure::Failure;
use super::form::Posted;
use super::pages::{self, Confirm};
use super::{checked, done, fail, page, posted, token_for};
use crate::server::Shared;
use crate::user::User;

/// A request about the object `ns/name`, made as `user`.
pub struct Asked {
    pub shared: Shared,
    pub user: User,
    pub ns: String,
    pub name: String,
}

impl FromRequestParts<Shared> for Asked {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, shared: &Shared) -> Result<Asked, Response> {
        let user = User::from_request_parts(parts, shared)
            .await
            .map_err(IntoResponse::into_response)?;
        let Path((ns, name)) = Path::<(String, String)>::from_request_parts(parts, shared)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Asked {
            shared: shared.clone(),
            user,
            ns,
            name,
        })
    }
}

impl Asked {
    /// The confirmation page of an action on this object, whose own page
    /// (where the action posts under, and "cancel" goes) is `back`.
    pub fn confirm(
        &self,
        back: &str,
        (title, action, form): (&str, &str, &str),
        what: Markup,
        fields: Markup,
    ) -> Response {
        let action = format!("{back}/{action}");
        page(pages::confirm(&Confirm {
            base: &self.shared.base,
            title,
            what,
            user: &self.user.name,
            action: &action,
            form,
            token: &token_for(&self.user),
            fields,
            back,
        }))
    }

    /// An action's outcome: 303 to `back` saying it, or the page saying
    /// why nothing was done.
    pub fn answer(&self, back: &str, outcome: Result<String, Failure>) -> Response {
        match outcome {
            Ok(outcome) => done(&self.shared, back, &outcome),
            Err(failure) => fail(&self.shared, failure, back),
        }
    }
}

/// A posted action form whose token is the user's (else 403, nothing done).
pub struct Post {
    pub asked: Asked,
    pub form: Posted,
}

impl FromRequest<Shared> for Post {
    type Rejection = Response;

    async fn from_request(request: Request, shared: &Shared) -> Result<Post, Response> {
        let (mut parts, body) = request.into_parts();
        let asked = Asked::from_request_parts(&mut parts, shared).await?;
        // Refused forms go back to the form they came from.
        let back = parts.uri.path().trim_start_matches('/').to_string();
        let body = Bytes::from_request(Request::from_parts(parts, body), shared)
            .await
            .map_err(IntoResponse::into_response)?;
        let form = posted(&body);
        checked(&asked.shared, &asked.user, &form, &back)?;
        Ok(Post { asked, form })
    }
}
