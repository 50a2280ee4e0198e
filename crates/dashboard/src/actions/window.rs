//! The actions on a break-glass window.

use axum::http::StatusCode;
use axum::response::Response;
use kube::ResourceExt;
use kube::api::Api;
use maud::html;
use tether_controller::adopt::{
    AdoptError, AdoptOptions, adopt_records, records_of_window, window_reason,
};
use tether_controller::api::break_glass::Resolution;
use tether_controller::api::{Application, BreakGlass};
use tether_controller::break_glass::request::{self, RequestError};
use tether_controller::credentials;
use tether_source::adopt::{AdoptError as SourceAdoptError, Author};

use super::asked::{Asked, Post};
use super::fail;
use super::failure::Failure;
use super::form::MAX_TTL;
use super::pages;
use crate::user::User;

/// A refused window request: the API server's refusals as [`Failure::of`]
/// says them, an unknown app or window is a 404, the rest a 400 or 409.
pub fn failure_of(error: &RequestError, user: &User, ns: &str, name: &str) -> Failure {
    match error {
        RequestError::Api { object, .. } => Failure::of(error, &user.name, object, ns),
        RequestError::Identity(_) => Failure::of(error, &user.name, "SelfSubjectReview", ns),
        RequestError::UnknownApp { .. } => Failure::new(
            StatusCode::NOT_FOUND,
            format!("Application {ns}/{name} not found"),
        ),
        RequestError::UnknownWindow { .. } => Failure::new(
            StatusCode::NOT_FOUND,
            format!("BreakGlass {ns}/{name} not found"),
        ),
        RequestError::NotOpen { .. } => Failure::new(StatusCode::CONFLICT, error.to_string()),
        other => Failure::refused(other),
    }
}

/// `break-glass/NS/NAME`: the window's page, where its actions go back to.
fn window_page(asked: &Asked) -> String {
    format!("break-glass/{}/{}", asked.ns, asked.name)
}

/// The window asked about, read as the user.
async fn window(asked: &Asked) -> Result<BreakGlass, Failure> {
    let Asked { user, ns, name, .. } = asked;
    request::find(&user.client, ns, None, Some(name))
        .await
        .map_err(|error| failure_of(&error, user, ns, name))
}

/// The confirmation page of an action on the window, saying `what` of it.
async fn confirmation(
    asked: &Asked,
    names: (&str, &str, &str),
    what: impl FnOnce(&BreakGlass) -> maud::Markup,
    fields: maud::Markup,
) -> Response {
    let back = window_page(asked);
    match window(asked).await {
        Ok(window) => asked.confirm(&back, names, what(&window), fields),
        Err(failure) => fail(&asked.shared, failure, &back),
    }
}

fn describe(window: &BreakGlass) -> maud::Markup {
    html! {
        "BreakGlass " strong { (window.namespace().unwrap_or_default()) "/" (window.name_any()) }
        " on Application " (window.spec.application) " (opened by " (window.spec.opened_by.username)
        ", until " (window.expires_at().to_string()) ": " (window.spec.reason) ")"
    }
}

pub async fn extend_page(asked: Asked) -> Response {
    let what = |window: &BreakGlass| {
        html! { p { "Extend " (describe(window)) " from now, recorded as an extension of its own with your reason (as "
        code { "tether break-glass extend" } " does)." } }
    };
    let names = ("Extend the window", "extend", "extend-window");
    confirmation(&asked, names, what, pages::extend_fields()).await
}

pub async fn extend(Post { asked, form }: Post) -> Response {
    let Asked { user, ns, name, .. } = &asked;
    let outcome = async {
        if form.reason.trim().is_empty() {
            return Err(Failure::refused(RequestError::NoReason));
        }
        let ttl = form.ttl().map_err(Failure::refused)?;
        let window = window(&asked).await?;
        let window = request::extend(&user.client, &window, ttl, MAX_TTL, form.reason.trim())
            .await
            .map_err(|error| failure_of(&error, user, ns, name))?;
        Ok(format!(
            "BreakGlass {ns}/{name} extended until {}",
            window.expires_at()
        ))
    };
    asked.answer(&window_page(&asked), outcome.await)
}

pub async fn close_page(asked: Asked) -> Response {
    let what = |window: &BreakGlass| {
        html! { p { "Close " (describe(window)) ": self-heal resumes for its scope. With " em { "adopt" }
        ", its recorded changes are first committed into Git with you as the author (as "
        code { "tether break-glass close --resolve adopt" } " does); with " em { "revert" } ", self-heal converges them back to Git now." } }
    };
    let names = ("Close the window", "close", "close-window");
    confirmation(&asked, names, what, pages::close_fields()).await
}

pub async fn close(Post { asked, form }: Post) -> Response {
    let Asked { user, ns, name, .. } = &asked;
    let outcome = async {
        let resolve = form.resolution().map_err(Failure::refused)?;
        let window = window(&asked).await?;
        // Adopt first: closing resumes self-heal, which would revert what
        // is not in Git yet. Git already holding the changes is fine.
        let mut adopted = String::new();
        if resolve == Resolution::Adopt {
            adopted = match adopt_window(user, &window).await {
                Err(Adoption::InGit) => "; Git already held its changes".to_string(),
                Err(Adoption::Failed(failure)) => return Err(failure),
                Ok(commit) => format!("; {commit}"),
            };
        }
        request::close(&user.client, &window, resolve)
            .await
            .map_err(|error| failure_of(&error, user, ns, name))?;
        let how = match resolve {
            Resolution::Adopt => "changes adopted into Git",
            Resolution::Revert => "changes will be reverted",
        };
        Ok(format!(
            "BreakGlass {ns}/{name} closed ({how}){adopted}; self-heal resumes for Application {}",
            window.spec.application
        ))
    };
    asked.answer(&window_page(&asked), outcome.await)
}

pub async fn adopt_page(asked: Asked) -> Response {
    let user = &asked.user.name;
    let what = |window: &BreakGlass| {
        html! { p { "Commit the changes recorded in " (describe(window)) " into the app's Git source, as one commit authored by you ("
        code { (author_of(user).name) " <" (author_of(user).email) ">" } ") with the window's reason as its message, pushed to the tracked branch (as "
        code { "tether adopt --window " (window.name_any()) } " does). The window stays open." } }
    };
    let names = ("Adopt into Git", "adopt", "adopt-window");
    confirmation(&asked, names, what, html! {}).await
}

pub async fn adopt(Post { asked, .. }: Post) -> Response {
    let Asked { user, ns, name, .. } = &asked;
    let outcome = async {
        let window = window(&asked).await?;
        match adopt_window(user, &window).await {
            Err(Adoption::InGit) => Ok(format!(
                "BreakGlass {ns}/{name}: Git already holds its changes"
            )),
            Err(Adoption::Failed(failure)) => Err(failure),
            Ok(outcome) => Ok(outcome),
        }
    };
    asked.answer(&window_page(&asked), outcome.await)
}

/// Why a window's changes were not committed.
enum Adoption {
    /// Git already has the live values (adopted before).
    InGit,
    Failed(Failure),
}

/// The commit author for a user without a git identity: their name, and
/// `NAME@tether.local` with what an address cannot hold made `-`.
pub fn author_of(user: &str) -> Author {
    let local: String = user
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '-',
        })
        .collect();
    Author {
        name: user.to_string(),
        email: format!("{local}@tether.local"),
    }
}

/// Adopts `window`'s recorded changes as `tether adopt --window` does: one
/// commit by the user, pushed with the app's credentials (read as the
/// user), then a sync request when the app syncs automatically.
async fn adopt_window(user: &User, window: &BreakGlass) -> Result<String, Adoption> {
    let ns = window.namespace().unwrap_or_default();
    let app_name = &window.spec.application;
    let object = format!("Application {ns}/{app_name}");
    let failed = |error: &(dyn std::error::Error + 'static)| {
        Adoption::Failed(Failure::of(error, &user.name, &object, &ns))
    };
    let records = records_of_window(window);
    if records.is_empty() {
        return Err(Adoption::Failed(Failure::new(
            StatusCode::CONFLICT,
            format!(
                "BreakGlass {ns}/{}: recorded no change to adopt; close it with revert",
                window.name_any()
            ),
        )));
    }
    let app = Api::<Application>::namespaced(user.client.clone(), &ns)
        .get(app_name)
        .await
        .map_err(|error| failed(&error))?;
    let credentials = credentials::read(&user.client, &ns, app.spec.adopt_source())
        .await
        .map_err(|error| failed(&error))?;
    let options = AdoptOptions {
        author: author_of(&user.name),
        branch: None,
        credentials,
        sandbox: Default::default(),
    };
    let reason = window_reason(window);
    let adopted = match adopt_records(user.client.clone(), &app, &records, &reason, &options).await
    {
        Ok(adopted) => adopted,
        Err(AdoptError::Source(SourceAdoptError::NothingChanged)) => return Err(Adoption::InGit),
        Err(error) => return Err(failed(&error)),
    };
    if app.spec.sync_policy.automated {
        tether_controller::request::request_sync(user.client.clone(), &ns, app_name, false)
            .await
            .map_err(|error| failed(&error))?;
    }
    Ok(format!(
        "adopted into {} on branch {}: commit {}",
        adopted.files.join(", "),
        adopted.branch,
        adopted.commit
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_without_a_git_identity_authors_as_their_name_at_tether_local() {
        let author = author_of("system:serviceaccount:team-a:ops");
        assert_eq!(author.name, "system:serviceaccount:team-a:ops");
        assert_eq!(
            author.email,
            "system-serviceaccount-team-a-ops@tether.local"
        );
        assert_eq!(author_of("alice").email, "alice@tether.local");
    }
}
