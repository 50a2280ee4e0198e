//! The break-glass pages: every window the user may list (open first, with
//! who, why, scope, time left and what changed inside), and one window's
//! page with its records and, once closed, its audit log. Windows are
//! read as the user on each view (they are few); the page is live, fetched
//! again when an Application changes (a change inside a window is also a
//! drift record of its app).

use std::time::SystemTime;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use maud::{Markup, html};
use serde::Deserialize;
use tether_controller::api::BreakGlass;
use tether_controller::api::break_glass::Resolution;
use tether_controller::break_glass::audit::{RECORD_KEY, WINDOW_UID_LABEL};
use tether_core::window::WindowPhase;

use crate::actions;
use crate::page::layout;
use crate::server::Shared;
use crate::user::User;

/// `?done=` after an action.
#[derive(Deserialize, Default)]
pub struct Done {
    pub done: Option<String>,
}

/// A window's phase now, in a word.
pub fn phase(window: &BreakGlass) -> WindowPhase {
    match window.times() {
        Ok(times) => times.phase(SystemTime::now()),
        Err(_) => WindowPhase::Closed,
    }
}

/// A window's phase in words (the Invalid phase from its status when set).
pub fn phase_word(window: &BreakGlass) -> String {
    match window.times() {
        Ok(times) => times.phase(SystemTime::now()).as_str().to_string(),
        Err(error) => format!("Invalid ({error})"),
    }
}

/// Time left until `expires_at` from `now`, in words: `12m 05s left`,
/// `1h 02m left`, or `expired`.
pub fn time_left(expires_at: &str, now: Timestamp) -> String {
    let Ok(expires) = expires_at.parse::<Timestamp>() else {
        return format!("expires at {expires_at}");
    };
    let left = expires.as_second() - now.as_second();
    if left <= 0 {
        return "expired".to_string();
    }
    let (h, m, s) = (left / 3600, left % 3600 / 60, left % 60);
    if h > 0 {
        format!("{h}h {m:02}m left")
    } else {
        format!("{m}m {s:02}s left")
    }
}

/// `GET break-glass`: every window the user may list.
pub async fn list(State(shared): State<Shared>, user: User) -> Response {
    listing(shared, user, false).await
}

/// `GET break-glass/live`: its live part.
pub async fn list_live(State(shared): State<Shared>, user: User) -> Response {
    listing(shared, user, true).await
}

async fn listing(shared: Shared, user: User, part: bool) -> Response {
    let scope = shared.cache.namespace.clone();
    let api: Api<BreakGlass> = match &scope {
        Some(ns) => Api::namespaced(user.client.clone(), ns),
        None => Api::all(user.client.clone()),
    };
    let mut windows = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(error) => {
            return refused(
                &shared.base,
                &format!("BreakGlass windows: {}", said(&error)),
            );
        }
    };
    let mut visible = Vec::with_capacity(windows.len());
    for window in windows.drain(..) {
        if user
            .sees(window.metadata.namespace.as_deref().unwrap_or_default())
            .await
        {
            visible.push(window);
        }
    }
    // Open first, then the newest.
    visible.sort_by_key(|w| {
        (
            phase(w) != WindowPhase::Open,
            std::cmp::Reverse(w.metadata.creation_timestamp.as_ref().map(|t| t.0)),
        )
    });
    let now = Timestamp::now();
    let live = html! {
        div #live data-live="break-glass/live" {
            @if visible.is_empty() { p { "No break-glass window." } } @else {
                table #windows {
                    thead { tr { th { "Window" } th { "Application" } th { "Phase" } th { "Opened by" } th { "Reason" } th { "Scope" } th { "Time" } th { "Changes" } } }
                    tbody { @for window in &visible { (row(window, now)) } }
                }
            }
        }
    };
    if part {
        return Html(live.into_string()).into_response();
    }
    let body = html! {
        p { "Windows let people change objects by hand during an incident; every change inside one is recorded and audited." }
        (live)
    };
    Html(layout(&shared.base, "Break-glass windows", body).into_string()).into_response()
}

fn row(window: &BreakGlass, now: Timestamp) -> Markup {
    let ns = window.metadata.namespace.as_deref().unwrap_or_default();
    let name = window.metadata.name.as_deref().unwrap_or_default();
    let open = phase(window) == WindowPhase::Open;
    let status = window.status.clone().unwrap_or_default();
    let expires = status
        .expires_at
        .clone()
        .unwrap_or_else(|| window.spec.expires_at.clone());
    html! {
        tr data-window={(ns) "/" (name)} {
            th scope="row" { a href={"break-glass/" (ns) "/" (name)} { (name) } }
            td { (ns) "/" (window.spec.application) }
            td .phase { (phase_word(window)) }
            td { (window.spec.opened_by.username) }
            td .wrap { (window.spec.reason) }
            td { (scope(window)) }
            td {
                @if open { span .expires data-expires=(expires) { (time_left(&expires, now)) } }
                @else if let Some(close) = &window.spec.close { "closed by " (close.by) " at " (close.at) }
                @else { "expired at " (expires) }
            }
            td .number { (status.record_count) }
        }
    }
}

fn scope(window: &BreakGlass) -> String {
    if window.spec.resources.is_empty() {
        return "the whole application".to_string();
    }
    window
        .spec
        .resources
        .iter()
        .map(|r| format!("{}/{}", r.kind, r.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `GET break-glass/{ns}/{name}`.
pub async fn window(
    State(shared): State<Shared>,
    user: User,
    Path((ns, name)): Path<(String, String)>,
    Query(done): Query<Done>,
) -> Response {
    one(shared, user, ns, name, Some(done)).await
}

/// `GET break-glass/{ns}/{name}/live`: its live part.
pub async fn window_live(
    State(shared): State<Shared>,
    user: User,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    one(shared, user, ns, name, None).await
}

/// One window's page, or only its live part when `done` is `None`.
async fn one(shared: Shared, user: User, ns: String, name: String, done: Option<Done>) -> Response {
    let api: Api<BreakGlass> = Api::namespaced(user.client.clone(), &ns);
    let window = match api.get(&name).await {
        Ok(window) => window,
        Err(kube::Error::Api(status)) if status.code == 404 => {
            return missing(&shared.base, &format!("BreakGlass {ns}/{name} not found"));
        }
        Err(error) => {
            return refused(
                &shared.base,
                &format!("BreakGlass {ns}/{name}: {}", said(&error)),
            );
        }
    };
    let audit = audit_records(&user, &window).await;
    let live = html! {
        div #live data-live={"break-glass/" (ns) "/" (name) "/live"} { (details(&window, &audit)) }
    };
    let Some(done) = done else {
        return Html(live.into_string()).into_response();
    };
    let token = actions::token_for(&user);
    let body = html! {
        p .as { "Acting as " strong { (user.name) } "." }
        (actions::flash(done.done.as_deref()))
        div #actions { (actions::window_actions(&window, &token)) }
        (live)
    };
    let title = format!("Break-glass window {ns}/{name}");
    Html(layout(&shared.base, &title, body).into_string()).into_response()
}

/// The audit records of a closed or expired window, as the user: the
/// ConfigMaps of its audit log, or why they could not be read.
async fn audit_records(user: &User, window: &BreakGlass) -> Result<Vec<String>, String> {
    let status = window.status.as_ref();
    let Some(chain) = status.and_then(|s| s.audit_chain.as_ref()) else {
        return Ok(Vec::new());
    };
    if phase(window) == WindowPhase::Open {
        return Ok(Vec::new());
    }
    let uid = window.metadata.uid.as_deref().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(user.client.clone(), &chain.namespace);
    let selector = format!("{WINDOW_UID_LABEL}={uid}");
    match api.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => {
            let mut records: Vec<String> = list
                .items
                .iter()
                .filter_map(|cm| cm.data.as_ref()?.get(RECORD_KEY).cloned())
                .collect();
            records.sort();
            Ok(records)
        }
        Err(error) => Err(format!(
            "the audit log in namespace {}: {}",
            chain.namespace,
            said(&error)
        )),
    }
}

fn details(window: &BreakGlass, audit: &Result<Vec<String>, String>) -> Markup {
    let status = window.status.clone().unwrap_or_default();
    let expires = status
        .expires_at
        .clone()
        .unwrap_or_else(|| window.spec.expires_at.clone());
    let open = phase(window) == WindowPhase::Open;
    html! {
        dl #window {
            dt { "Application" } dd { (window.spec.application) }
            dt { "Phase" } dd #phase { (phase_word(window)) }
            dt { "Opened by" } dd { (window.spec.opened_by.username) }
            dt { "Reason" } dd { (window.spec.reason) }
            dt { "Scope" } dd { (scope(window)) }
            dt { "Expires" } dd {
                (expires)
                @if open { " — " span #expires .expires data-expires=(expires) { (time_left(&expires, Timestamp::now())) } }
            }
            @for extension in &window.spec.extensions {
                dt { "Extended" } dd { "by " (extension.by) " at " (extension.at) " to " (extension.expires_at) ": " (extension.reason) }
            }
            @if let Some(close) = &window.spec.close {
                dt { "Closed" } dd { "by " (close.by) " at " (close.at) " (" (resolution(close.resolve)) ")" }
            }
            @if let Some(chain) = &status.audit_chain {
                dt { "Audit log" } dd { (chain.state) ": " (chain.message) " (" (chain.records) " records)" }
            }
        }
        section #records {
            h3 { "Changes recorded inside the window (" (status.record_count) ")" }
            @if status.records.is_empty() { p { "No change recorded." } } @else {
                table {
                    thead { tr { th { "#" } th { "Object" } th { "Field" } th { "Value" } th { "Writer" } th { "Recorded" } } }
                    tbody {
                        @for record in &status.records {
                            @for field in &record.fields {
                                tr {
                                    td .number { (record.sequence) }
                                    td { (record.object.to_string()) }
                                    td .field { code { (field.path) } }
                                    td .live { (field.live.as_ref().map(|v| v.to_string()).unwrap_or_default()) }
                                    td .writer { (field.writer.as_ref().map(|w| w.manager.as_str()).unwrap_or("–")) }
                                    td { (record.recorded_at) }
                                }
                            }
                        }
                    }
                }
            }
        }
        @match audit {
            Ok(records) if !records.is_empty() => {
                section #audit {
                    h3 { "Audit records" }
                    ol { @for record in records { li { code .wrap { (record) } } } }
                }
            }
            Ok(_) => {}
            Err(why) => { section #audit { h3 { "Audit records" } p { "Not shown: " (why) } } }
        }
    }
}

fn resolution(resolve: Resolution) -> &'static str {
    match resolve {
        Resolution::Adopt => "adopted into Git",
        Resolution::Revert => "reverted to Git",
    }
}

fn said(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

fn refused(base: &str, message: &str) -> Response {
    let status = if message.contains("forbidden") {
        StatusCode::FORBIDDEN
    } else {
        StatusCode::BAD_GATEWAY
    };
    (
        status,
        Html(
            layout(
                base,
                "Not shown",
                html! { p #error role="alert" { (message) } },
            )
            .into_string(),
        ),
    )
        .into_response()
}

fn missing(base: &str, message: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        Html(
            layout(
                base,
                "Not found",
                html! { p #error role="alert" { (message) } },
            )
            .into_string(),
        ),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_reads_in_minutes_or_hours_and_says_expired() {
        let now: Timestamp = "2026-12-04T10:00:00Z".parse().unwrap();
        assert_eq!(time_left("2026-12-04T10:12:05Z", now), "12m 05s left");
        assert_eq!(time_left("2026-12-04T11:02:00Z", now), "1h 02m left");
        assert_eq!(time_left("2026-12-04T09:00:00Z", now), "expired");
        assert_eq!(time_left("soon", now), "expires at soon");
    }
}
