//! The actions on an Application.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::response::Response;
use kube::ResourceExt;
use kube::api::Api;
use maud::html;
use tether_controller::api::Application;
use tether_controller::break_glass::request::{self, Opening, RequestError};
use tether_controller::request::{SyncRequest, request_sync_with};
use tether_controller::sync::preview::preview_application;
use tether_source::Repositories;

use super::asked::{Asked, Post};
use super::failure::Failure;
use super::form::MAX_TTL;
use super::pages;
use super::{done, fail, page};
use crate::overview::Row;

/// The sources fetched for dry runs, cached as the CLI caches its own.
fn repositories() -> Arc<Repositories> {
    static REPOSITORIES: OnceLock<Arc<Repositories>> = OnceLock::new();
    REPOSITORIES
        .get_or_init(|| {
            Arc::new(Repositories::new(
                std::env::temp_dir().join("tether-dashboard-cache"),
            ))
        })
        .clone()
}

/// `apps/NS/NAME`: the app's page, where its actions go back to.
fn app_page(asked: &Asked) -> String {
    format!("apps/{}/{}", asked.ns, asked.name)
}

/// `error` from acting on the app, as [`Failure::of`] says it.
fn failed(asked: &Asked, error: &(dyn std::error::Error + 'static)) -> Failure {
    let Asked { user, ns, name, .. } = asked;
    Failure::of(error, &user.name, &format!("Application {ns}/{name}"), ns)
}

pub async fn sync_page(asked: Asked) -> Response {
    let Asked { ns, name, .. } = &asked;
    let what = html! {
        p { "Ask the controller to sync Application " strong { (ns) "/" (name) } " now: it applies the whole desired state from Git at the app's own revision, as "
            code { "tether sync " (name) " -n " (ns) " --no-wait" } " does (the request is an annotation on the Application, written as you)." }
    };
    let names = ("Sync now", "sync", "sync-now");
    asked.confirm(&app_page(&asked), names, what, html! {})
}

pub async fn sync(Post { asked, .. }: Post) -> Response {
    let Asked { user, ns, name, .. } = &asked;
    let outcome = request_sync_with(user.client.clone(), ns, name, &SyncRequest::default())
        .await
        .map(|_| format!("sync of {ns}/{name} requested by {}", user.name))
        .map_err(|error| failed(&asked, &error));
    asked.answer(&app_page(&asked), outcome)
}

pub async fn dry_run_page(asked: Asked) -> Response {
    let Asked { ns, name, .. } = &asked;
    let what = html! {
        p { "Fetch Application " strong { (ns) "/" (name) } "'s source and compare each object with the cluster by server-side dry run, as "
            code { "tether sync " (name) " -n " (ns) " --dry-run" } " does. Nothing is applied." }
    };
    let names = ("Dry run", "dry-run", "dry-run");
    asked.confirm(&app_page(&asked), names, what, html! {})
}

pub async fn dry_run(Post { asked, .. }: Post) -> Response {
    let Asked { shared, user, .. } = &asked;
    let back = app_page(&asked);
    let preview = async {
        let app = read(&asked).await?;
        preview_application(&user.client, &app, None, repositories())
            .await
            .map_err(|error| failed(&asked, &error))
    };
    match preview.await {
        Ok(preview) => page(pages::plan(
            &shared.base,
            &format!("{}/{}", asked.ns, asked.name),
            &preview.commit,
            &back,
            &preview.previews,
        )),
        Err(failure) => fail(shared, failure, &back),
    }
}

/// The Application as the API server has it now, read as the user.
async fn read(asked: &Asked) -> Result<Application, Failure> {
    Api::<Application>::namespaced(asked.user.client.clone(), &asked.ns)
        .get(&asked.name)
        .await
        .map_err(|error| failed(asked, &error))
}

pub async fn refresh_page(asked: Asked) -> Response {
    let Asked { ns, name, .. } = &asked;
    let what = html! {
        p { "Read Application " strong { (ns) "/" (name) } " from the API server now, as you, and show its state as the controller last reported it (as "
            code { "tether status " (name) " -n " (ns) } " does). Tether has no separate refresh: the controller compares with Git on every change and resync; use "
            em { "Dry run" } " to compare now, " em { "Sync now" } " to apply." }
    };
    let names = ("Refresh", "refresh", "refresh");
    asked.confirm(&app_page(&asked), names, what, html! {})
}

pub async fn refresh(Post { asked, .. }: Post) -> Response {
    let Asked { ns, name, .. } = &asked;
    let outcome = read(&asked).await.map(|app| {
        let row = Row::of(&app);
        let word = |text: Option<&str>| text.unwrap_or("Unknown").to_string();
        format!(
            "Application {ns}/{name} read now: {}, {}, {} at {}",
            word(row.state.map(|s| s.as_str())),
            word(row.sync.map(|s| s.as_str())),
            word(row.health.map(|h| h.as_str())),
            row.revision.unwrap_or("no revision yet"),
        )
    });
    asked.answer(&app_page(&asked), outcome)
}

pub async fn open_page(asked: Asked) -> Response {
    let Asked { ns, name, .. } = &asked;
    let what = html! {
        p { "Open a break-glass window on Application " strong { (ns) "/" (name) } ": self-heal leaves its scope alone until the window expires or is closed, and every change made inside is recorded as Emergency drift, with you as the opener (as "
            code { "tether break-glass open " (name) " -n " (ns) } " does)." }
    };
    let names = ("Open break-glass window", "break-glass", "open-window");
    asked.confirm(&app_page(&asked), names, what, pages::open_fields())
}

/// How long opening a window waits for the controller to mark it Open
/// before the page says it has not yet.
const OPEN_WAIT: Duration = Duration::from_secs(10);

pub async fn open(Post { asked, form }: Post) -> Response {
    let Asked {
        shared,
        user,
        ns,
        name,
    } = &asked;
    let opened = async {
        let window = form.window().map_err(Failure::refused)?;
        let opening = Opening {
            namespace: ns.clone(),
            app: name.clone(),
            resources: window.resources,
            reason: window.reason,
            ttl: window.ttl,
            max_ttl: MAX_TTL,
        };
        let window = request::open(&user.client, opening)
            .await
            .map_err(|error| super::window::failure_of(&error, user, ns, name))?;
        // As `tether break-glass open`: the window is in force once the
        // controller has marked it Open; until then a change may be reverted.
        match request::opened(&user.client, &window, OPEN_WAIT).await {
            Ok(window) => Ok((window, "; self-heal is suspended in its scope")),
            Err(RequestError::NotOpened { .. }) => Ok((
                window,
                "; no controller has opened it yet, so self-heal may still revert changes in its scope",
            )),
            Err(error) => Err(super::window::failure_of(&error, user, ns, name)),
        }
    };
    match opened.await {
        Ok((window, state)) => done(
            shared,
            &pages::window_path(&window),
            &format!(
                "BreakGlass {ns}/{} opened by {} until {}{state}",
                window.name_any(),
                window.spec.opened_by.username,
                window.spec.expires_at
            ),
        ),
        Err(failure) => fail(
            shared,
            failure,
            &format!("{}/break-glass", app_page(&asked)),
        ),
    }
}
