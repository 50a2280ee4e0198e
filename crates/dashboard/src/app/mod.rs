//! An Application's page (`apps/NS/NAME`) and its live part
//! (`apps/NS/NAME/live`): its status from the cache, and the live
//! children of its workloads, its Events and its windows read as the user.

pub mod page;
pub mod reads;
pub mod view;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use kube::api::{Api, ListParams};
use kube::runtime::reflector::ObjectRef;
use maud::html;
use tether_controller::api::{Application, BreakGlass, StoredApplication};

use crate::actions;
use crate::server::Shared;
use crate::user::User;
use crate::windows::Done;
use page::AppPage;

/// `GET apps/{ns}/{name}`.
pub async fn show(
    State(shared): State<Shared>,
    user: User,
    Path((ns, name)): Path<(String, String)>,
    Query(done): Query<Done>,
) -> Response {
    render(&shared, &user, &ns, &name, Some(done)).await
}

/// `GET apps/{ns}/{name}/live`.
pub async fn live(
    State(shared): State<Shared>,
    user: User,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    render(&shared, &user, &ns, &name, None).await
}

/// The page (or only its live part when `done` is `None`) of Application
/// `ns/name`, if it is cached and `user` may see its namespace.
async fn render(
    shared: &Shared,
    user: &User,
    ns: &str,
    name: &str,
    done: Option<Done>,
) -> Response {
    let stored = shared
        .cache
        .apps()
        .await
        .get(&ObjectRef::<StoredApplication>::new(name).within(ns));
    let app = match stored.as_deref().map(|s| &s.decoded) {
        Some(Ok(app)) if user.sees(ns).await => app.clone(),
        Some(Err(invalid)) if user.sees(ns).await => {
            return not_found(
                shared,
                &format!("Application {ns}/{name} is not valid: {invalid}"),
            );
        }
        _ => return not_found(shared, &format!("Application {ns}/{name} not found")),
    };
    let live = reads::live(user, &app).await;
    let windows = windows_of(user, &app).await;
    let page = AppPage {
        app: &app,
        live: &live,
        windows: &windows,
        user: &user.name,
    };
    let markup = match done {
        None => page::live(&page),
        Some(done) => {
            let token = actions::token_for(user);
            page::page(
                &shared.base,
                &page,
                actions::app_actions(&app, &token),
                actions::flash(done.done.as_deref()),
            )
        }
    };
    Html(markup.into_string()).into_response()
}

/// The BreakGlass windows of `app`, as the user (none when they may not
/// list them).
async fn windows_of(user: &User, app: &Application) -> Vec<BreakGlass> {
    let ns = app.metadata.namespace.as_deref().unwrap_or_default();
    let name = app.metadata.name.as_deref().unwrap_or_default();
    let api: Api<BreakGlass> = Api::namespaced(user.client.clone(), ns);
    match api.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter(|w| w.spec.application == name)
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn not_found(shared: &Shared, message: &str) -> Response {
    let body =
        html! { p #error role="alert" { (message) } p { a href="./" { "Back to the overview" } } };
    (
        StatusCode::NOT_FOUND,
        Html(crate::page::layout(&shared.base, "Not found", body).into_string()),
    )
        .into_response()
}
