//! The actions on an Application.

use std::sync::{Arc, OnceLock};

use axum::response::Response;
use kube::ResourceExt;
use kube::api::Api;
use maud::html;
use tether_controller::api::Application;
use tether_controller::break_glass::request::{self, Opening};
use tether_controller::request::{SyncRequest, request_sync_with};
use tether_controller::sync::preview::preview_application;
use tether_source::Repositories;

use super::asked::{Asked, Post};
use super::failure::Failure;
use super::form::MAX_TTL;
use super::pages::{self, Confirm};
use super::{done, fail, page};
use crate::overview::Row;
use crate::server::Shared;
use crate::user::User;

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

/// The confirmation page of an action on `ns/name`.
fn confirmation(
    shared: &Shared,
    user: &User,
    (ns, name): (&str, &str),
    (title, action, form): (&str, &str, &str),
    what: maud::Markup,
    fields: maud::Markup,
) -> Response {
    let back = format!("apps/{ns}/{name}");
    let action = format!("{back}/{action}");
    page(pages::confirm(&Confirm {
        base: &shared.base,
        title,
        what,
        user: &user.name,
        action: &action,
        form,
        token: &super::token_for(user),
        fields,
        back: &back,
    }))
}

pub async fn sync_page(
    Asked {
        shared,
        user,
        ns,
        name,
    }: Asked,
) -> Response {
    let what = html! {
        p { "Ask the controller to sync Application " strong { (ns) "/" (name) } " now: it applies the whole desired state from Git at the app's own revision, as "
            code { "tether sync " (name) " -n " (ns) " --no-wait" } " does (the request is an annotation on the Application, written as you)." }
    };
    confirmation(
        &shared,
        &user,
        (&ns, &name),
        ("Sync now", "sync", "sync-now"),
        what,
        html! {},
    )
}

pub async fn sync(
    Post {
        asked:
            Asked {
                shared,
                user,
                ns,
                name,
            },
        ..
    }: Post,
) -> Response {
    let back = format!("apps/{ns}/{name}");
    match request_sync_with(user.client.clone(), &ns, &name, &SyncRequest::default()).await {
        Ok(_) => done(
            &shared,
            &back,
            &format!("sync of {ns}/{name} requested by {}", user.name),
        ),
        Err(error) => fail(
            &shared,
            Failure::of(&error, &user.name, &format!("Application {ns}/{name}"), &ns),
            &back,
        ),
    }
}

pub async fn dry_run_page(
    Asked {
        shared,
        user,
        ns,
        name,
    }: Asked,
) -> Response {
    let what = html! {
        p { "Fetch Application " strong { (ns) "/" (name) } "'s source and compare each object with the cluster by server-side dry run, as "
            code { "tether sync " (name) " -n " (ns) " --dry-run" } " does. Nothing is applied." }
    };
    confirmation(
        &shared,
        &user,
        (&ns, &name),
        ("Dry run", "dry-run", "dry-run"),
        what,
        html! {},
    )
}

pub async fn dry_run(
    Post {
        asked:
            Asked {
                shared,
                user,
                ns,
                name,
            },
        ..
    }: Post,
) -> Response {
    let back = format!("apps/{ns}/{name}");
    let object = format!("Application {ns}/{name}");
    let app = match read(&user, &ns, &name).await {
        Ok(app) => app,
        Err(failure) => return fail(&shared, failure, &back),
    };
    match preview_application(&user.client, &app, None, repositories()).await {
        Ok(preview) => page(pages::plan(
            &shared.base,
            &format!("{ns}/{name}"),
            &preview.commit,
            &back,
            &preview.previews,
        )),
        Err(error) => fail(
            &shared,
            Failure::of(&error, &user.name, &object, &ns),
            &back,
        ),
    }
}

/// The Application as the API server has it now, read as `user`.
async fn read(user: &User, ns: &str, name: &str) -> Result<Application, Failure> {
    Api::<Application>::namespaced(user.client.clone(), ns)
        .get(name)
        .await
        .map_err(|error| Failure::of(&error, &user.name, &format!("Application {ns}/{name}"), ns))
}

pub async fn refresh_page(
    Asked {
        shared,
        user,
        ns,
        name,
    }: Asked,
) -> Response {
    let what = html! {
        p { "Read Application " strong { (ns) "/" (name) } " from the API server now, as you, and show its state as the controller last reported it (as "
            code { "tether status " (name) " -n " (ns) } " does). Tether has no separate refresh: the controller compares with Git on every change and resync; use "
            em { "Dry run" } " to compare now, " em { "Sync now" } " to apply." }
    };
    confirmation(
        &shared,
        &user,
        (&ns, &name),
        ("Refresh", "refresh", "refresh"),
        what,
        html! {},
    )
}

pub async fn refresh(
    Post {
        asked:
            Asked {
                shared,
                user,
                ns,
                name,
            },
        ..
    }: Post,
) -> Response {
    let back = format!("apps/{ns}/{name}");
    match read(&user, &ns, &name).await {
        Ok(app) => {
            let row = Row::of(&app);
            let word = |text: Option<&str>| text.unwrap_or("Unknown").to_string();
            let outcome = format!(
                "Application {ns}/{name} read now: {}, {}, {} at {}",
                word(row.state.map(|s| s.as_str())),
                word(row.sync.map(|s| s.as_str())),
                word(row.health.map(|h| h.as_str())),
                row.revision.unwrap_or("no revision yet"),
            );
            done(&shared, &back, &outcome)
        }
        Err(failure) => fail(&shared, failure, &back),
    }
}

pub async fn open_page(
    Asked {
        shared,
        user,
        ns,
        name,
    }: Asked,
) -> Response {
    let what = html! {
        p { "Open a break-glass window on Application " strong { (ns) "/" (name) } ": self-heal leaves its scope alone until the window expires or is closed, and every change made inside is recorded as Emergency drift, with you as the opener (as "
            code { "tether break-glass open " (name) " -n " (ns) } " does)." }
    };
    confirmation(
        &shared,
        &user,
        (&ns, &name),
        ("Open break-glass window", "break-glass", "open-window"),
        what,
        pages::open_fields(),
    )
}

pub async fn open(
    Post {
        asked:
            Asked {
                shared,
                user,
                ns,
                name,
            },
        form: posted,
    }: Post,
) -> Response {
    let back = format!("apps/{ns}/{name}/break-glass");
    let window = match posted.window() {
        Ok(window) => window,
        Err(error) => return fail(&shared, Failure::refused(error), &back),
    };
    let opening = Opening {
        namespace: ns.clone(),
        app: name.clone(),
        resources: window.resources,
        reason: window.reason,
        ttl: window.ttl,
        max_ttl: MAX_TTL,
    };
    match request::open(&user.client, opening).await {
        Ok(window) => done(
            &shared,
            &pages::window_path(&window),
            &format!(
                "BreakGlass {ns}/{} opened by {} until {}",
                window.name_any(),
                window.spec.opened_by.username,
                window.spec.expires_at
            ),
        ),
        Err(error) => fail(
            &shared,
            super::window::failure_of(&error, &user, &ns, &name),
            &back,
        ),
    }
}
