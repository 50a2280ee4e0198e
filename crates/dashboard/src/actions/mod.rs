//! The dashboard's actions, each made as the signed-in user with the same
//! controller function the CLI calls, so the API server authorizes it and
//! its audit log names the person:
//!
//! - on an app (`apps/NS/NAME/…`): `sync` (`tether sync --no-wait`),
//!   `dry-run` (`tether sync --dry-run`), `refresh` (reads the Application
//!   anew, as the user, and says its state), `break-glass` (`tether
//!   break-glass open`);
//! - on a window (`break-glass/NS/NAME/…`): `extend`, `close` (`revert`, or
//!   `adopt` as `tether break-glass close --resolve adopt`), `adopt`
//!   (`tether adopt --window`).
//!
//! Each is a GET confirmation page and a POST that checks the form's
//! [`csrf`] token first, then acts and answers 303 to the app's or
//! window's page with `?done=` (see [`pages::flash`]), or a page saying
//! why nothing was done ([`failure`]).

pub mod asked;
pub mod csrf;
pub mod failure;
pub mod form;
pub mod host;
pub mod pages;

mod app;
mod window;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

use crate::server::Shared;
use crate::user::User;
use failure::Failure;
use form::Posted;

pub use pages::{app_actions, flash, window_actions};

/// The actions' routes, merged into [`crate::server::app`].
pub fn routes() -> Router<Shared> {
    Router::new()
        .route(
            "/apps/{ns}/{name}/sync",
            get(app::sync_page).post(app::sync),
        )
        .route(
            "/apps/{ns}/{name}/dry-run",
            get(app::dry_run_page).post(app::dry_run),
        )
        .route(
            "/apps/{ns}/{name}/refresh",
            get(app::refresh_page).post(app::refresh),
        )
        .route(
            "/apps/{ns}/{name}/break-glass",
            get(app::open_page).post(app::open),
        )
        .route(
            "/break-glass/{ns}/{name}/extend",
            get(window::extend_page).post(window::extend),
        )
        .route(
            "/break-glass/{ns}/{name}/close",
            get(window::close_page).post(window::close),
        )
        .route(
            "/break-glass/{ns}/{name}/adopt",
            get(window::adopt_page).post(window::adopt),
        )
}

/// The token of `user`'s forms.
pub fn token_for(user: &User) -> String {
    csrf::token(&user.name)
}

/// A posted form (`application/x-www-form-urlencoded`); anything else
/// reads as an empty form, which its missing token then refuses.
fn posted(body: &[u8]) -> Posted {
    let mut posted = Posted::default();
    for (key, value) in form_urlencoded::parse(body) {
        let value = value.into_owned();
        match key.as_ref() {
            "token" => posted.token = Some(value),
            "reason" => posted.reason = value,
            "scope" => posted.scope = value,
            "duration" => posted.duration = value,
            "resolve" => posted.resolve = value,
            _ => {}
        }
    }
    posted
}

/// Refuses a form without `user`'s token: 403, nothing done.
fn checked(shared: &Shared, user: &User, posted: &Posted, back: &str) -> Result<(), Response> {
    csrf::verify(&user.name, posted.token.as_deref()).map_err(|error| {
        fail(
            shared,
            Failure::new(StatusCode::FORBIDDEN, error.to_string()),
            back,
        )
    })
}

/// 303 to `to` (relative to the base) with the outcome in `?done=`.
fn done(shared: &Shared, to: &str, outcome: &str) -> Response {
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("done", outcome)
        .finish();
    let location = format!("{}{to}?{query}", shared.base);
    (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
}

/// The page of an action not done.
fn fail(shared: &Shared, failure: Failure, back: &str) -> Response {
    let page = pages::failure(&shared.base, &failure.message, back);
    (failure.status, Html(page.into_string())).into_response()
}

fn page(markup: maud::Markup) -> Response {
    Html(markup.into_string()).into_response()
}

#[cfg(test)]
mod tests;
