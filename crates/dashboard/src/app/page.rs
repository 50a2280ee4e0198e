//! An Application's page as HTML: header, actions, source, conditions,
//! objects as a tree, drift with its writers, history, Events, and its
//! break-glass windows. The part below the actions is `#live`, fetched
//! again on every change.

use maud::{Markup, PreEscaped, html};
use tether_controller::api::application::ResourceStatus;
use tether_controller::api::{Application, BreakGlass};
use tether_core::{HealthStatus, SyncStatus};

use super::reads::{Live, last_seen};
use super::view::{Node, commit_link, has_children, reason_words};
use crate::page::{badge, class};

/// Everything the page shows.
pub struct AppPage<'a> {
    pub app: &'a Application,
    pub live: &'a Live,
    pub windows: &'a [BreakGlass],
    /// Who the page acts as.
    pub user: &'a str,
}

/// The whole page; `actions` and `flash` come from the actions module.
pub fn page(base: &str, page: &AppPage, actions: Markup, flash: Markup) -> Markup {
    let (ns, name) = names(page.app);
    let body = html! {
        p .as { "Acting as " strong { (page.user) } "." }
        (flash)
        div #actions { (actions) }
        (live(page))
    };
    crate::page::layout(base, &format!("Application {ns}/{name}"), body)
}

/// The part that follows the status.
pub fn live(page: &AppPage) -> Markup {
    let app = page.app;
    let (ns, name) = names(app);
    let status = app.status.clone().unwrap_or_default();
    html! {
        div #live data-live={"apps/" (ns) "/" (name) "/live"} {
            section #summary aria-label="Status" {
                p {
                    "Sync: " strong #sync-status { (sync_word(status.sync.status)) } " · "
                    "Health: " strong #health-status { (health_word(status.health.status)) } " · "
                    span #state .{"state " (class(status.state))} { (badge(status.state)) }
                }
                @if !status.health.message.is_empty() { p .muted { (status.health.message) } }
            }
            (source(app))
            (conditions(app))
            (objects(app, page.live))
            (drift(app))
            (history(app))
            (events(page.live))
            (windows(page.windows))
            @if !page.live.unread.is_empty() {
                section #unread {
                    h3 { "Not shown" }
                    ul { @for why in &page.live.unread { li { (why) } } }
                }
            }
        }
    }
}

fn names(app: &Application) -> (&str, &str) {
    (
        app.metadata.namespace.as_deref().unwrap_or_default(),
        app.metadata.name.as_deref().unwrap_or_default(),
    )
}

fn sync_word(sync: SyncStatus) -> Markup {
    let icon = match sync {
        SyncStatus::Synced => "✔",
        SyncStatus::OutOfSync => "↻",
        _ => "…",
    };
    html! { span aria-hidden="true" { (icon) } " " (sync.as_str()) }
}

fn health_word(health: HealthStatus) -> Markup {
    let icon = match health {
        HealthStatus::Healthy => "✔",
        HealthStatus::Degraded => "✖",
        HealthStatus::Progressing => "…",
        _ => "?",
    };
    html! { span aria-hidden="true" { (icon) } " " (health.as_str()) }
}

fn source(app: &Application) -> Markup {
    let status = app.status.as_ref();
    let revision = status.and_then(|s| s.sync.revision.as_deref());
    let resolved = status
        .map(|s| s.sync.sources.as_slice())
        .unwrap_or_default();
    let sources = app.spec.sources();
    let single = sources.len() == 1;
    html! {
        section #source {
            h3 { @if single { "Source" } @else { "Sources" } }
            @for (index, source) in sources.iter().enumerate() {
                dl {
                    @if !source.name.is_empty() {
                        dt { "Name" } dd { code { (source.name) } }
                    }
                    dt { "Repository" } dd { code { (source.repo_url) } }
                    @if source.is_chart() {
                        dt { "Chart" } dd { code { (source.chart) } }
                        dt { "Version" } dd { @if source.version.is_empty() { "the highest stable" } @else { code { (source.version) } } }
                    } @else {
                        dt { "Path" } dd { code { @if source.path.is_empty() { "." } @else { (source.path) } } }
                        dt { "Tracks" } dd { @if source.revision.is_empty() { "the default branch" } @else { code { (source.revision) } } }
                    }
                    @if let Some(found) = resolved.get(index).filter(|found| !single && found.repo_url == source.repo_url) {
                        dt { "Resolved" } dd { (revision_link(&source.repo_url, &found.revision)) }
                    }
                }
            }
            dl {
                dt { "Synced revision" }
                dd {
                    @match revision {
                        Some(revision) if single => (revision_link(&sources[0].repo_url, revision)),
                        Some(revision) => code { (revision) },
                        None => "not synced yet",
                    }
                }
                @if let Some(project) = status.and_then(|s| s.project.as_deref()) {
                    dt { "Project" } dd { (project) }
                }
                @if let Some(applies_as) = status.and_then(|s| s.applies_as.as_deref()) {
                    dt { "Applies as" } dd { (applies_as) }
                }
            }
        }
    }
}

/// A revision, linked to its commit page when the forge is known.
fn revision_link(repo_url: &str, revision: &str) -> Markup {
    html! {
        @match commit_link(repo_url, revision) {
            Some(link) => a href=(link) rel="noreferrer" { code { (revision) } },
            None => code { (revision) },
        }
    }
}

fn conditions(app: &Application) -> Markup {
    let conditions = app
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    html! {
        section #conditions {
            h3 { "Conditions" }
            @if conditions.is_empty() { p { "None reported yet." } } @else {
                table {
                    thead { tr { th { "Type" } th { "Status" } th { "Reason" } th { "What it means" } th { "Since" } } }
                    tbody {
                        @for condition in conditions {
                            tr {
                                th scope="row" { (condition.type_) }
                                td { (condition.status) }
                                td { (condition.reason) }
                                td .wrap {
                                    @if let Some(words) = reason_words(&condition.reason) { (words) " " }
                                    (condition.message)
                                }
                                td { (condition.last_transition_time.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn objects(app: &Application, live: &Live) -> Markup {
    let resources = app
        .status
        .as_ref()
        .map(|s| s.resources.as_slice())
        .unwrap_or_default();
    html! {
        section #objects {
            h3 { "Objects" }
            @if resources.is_empty() { p { "None applied yet." } } @else {
                ul .tree {
                    @for resource in resources { (managed(app, resource, live)) }
                }
            }
        }
    }
}

fn managed(app: &Application, resource: &ResourceStatus, live: &Live) -> Markup {
    let id = match &resource.namespace {
        Some(ns) => format!("{} {ns}/{}", resource.kind, resource.name),
        None => format!("{} {}", resource.kind, resource.name),
    };
    let children = match (&resource.namespace, has_children(&resource.kind)) {
        (Some(ns), true) => live
            .owned
            .get(ns)
            .map(|owned| owned.under(&resource.kind, &resource.name, 3))
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let (ns, name) = names(app);
    html! {
        li data-object=(id) {
            span .kind { (resource.kind) } " " (resource.name)
            " · " (sync_word(resource.sync))
            @if let Some(health) = &resource.health { " · " (health_word(health.status)) }
            @if resource.sync == SyncStatus::OutOfSync {
                " · " a href={"apps/" (ns) "/" (name) "/dry-run"} { "diff" }
            }
            @if let Some(drift) = &resource.drift { " · " span .muted { (drift) } }
            @if !children.is_empty() { ul { @for node in &children { (child(node)) } } }
        }
    }
}

fn child(node: &Node) -> Markup {
    html! {
        li data-object={(node.kind) " " (node.name)} {
            span .kind { (node.kind) } " " (node.name)
            @if let Some(health) = node.health { " · " (health_word(health)) }
            @if !node.message.is_empty() { " · " span .muted { (node.message) } }
            @if !node.children.is_empty() { ul { @for node in &node.children { (child(node)) } } }
        }
    }
}

fn drift(app: &Application) -> Markup {
    let status = app.status.as_ref();
    let open = status.map(|s| s.drift.as_slice()).unwrap_or_default();
    let last = status.map(|s| s.last_drift.as_slice()).unwrap_or_default();
    let dash = || PreEscaped("–");
    html! {
        section #drift {
            h3 { "Drift" }
            @if open.is_empty() && last.is_empty() { p { "No drift recorded." } } @else {
                table {
                    thead { tr { th { "Object" } th { "Kind" } th { "Field" } th { "Desired" } th { "Live" } th { "Writer" } th { "Detected" } th { "Response" } } }
                    tbody {
                        @for entry in open.iter().chain(last) {
                            @let record = &entry.record;
                            @let response = match &entry.resolved_at {
                                Some(at) => format!("{} (resolved {at})", entry.response.as_str()),
                                None => entry.response.as_str().to_string(),
                            };
                            @if record.fields.is_empty() {
                                tr data-open=(entry.resolved_at.is_none()) {
                                    td { (record.object.to_string()) } td .kind { (record.kind.as_str()) }
                                    td .field { (dash()) } td .desired { (dash()) } td .live { (dash()) } td .writer { (dash()) }
                                    td { (record.detected_at) } td { (response) }
                                }
                            }
                            @for field in &record.fields {
                                tr data-open=(entry.resolved_at.is_none()) {
                                    td { (record.object.to_string()) } td .kind { (record.kind.as_str()) }
                                    td .field { code { (field.path) } }
                                    td .desired { (value(field.desired.as_ref())) }
                                    td .live { (value(field.live.as_ref())) }
                                    td .writer {
                                        @match &field.writer {
                                            Some(writer) => {
                                                (writer.manager)
                                                @if let Some(sub) = &writer.subresource { "/" (sub) }
                                                " " (format!("{:?}", writer.operation))
                                                @if let Some(time) = &writer.time { " at " (time) }
                                            }
                                            None => (dash()),
                                        }
                                    }
                                    td { (record.detected_at) } td { (response) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A drifted value as the status holds it (Secret values are masked by
/// the controller before they are recorded).
fn value(value: Option<&serde_json::Value>) -> String {
    match value {
        None => "(none)".to_string(),
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(other) => other.to_string(),
    }
}

fn history(app: &Application) -> Markup {
    let status = app.status.as_ref();
    let history = status.map(|s| s.history.as_slice()).unwrap_or_default();
    let operation = status.and_then(|s| s.operation_state.as_ref());
    html! {
        section #history {
            h3 { "History" }
            @if let Some(operation) = operation {
                p #last-operation {
                    "Last operation: " strong { (operation.phase.as_str()) } " at " code { (operation.revision) }
                    ", started " (operation.started_at)
                    @if let Some(finished) = &operation.finished_at { ", finished " (finished) }
                    @if !operation.message.is_empty() { ": " (operation.message) }
                }
            }
            @if history.is_empty() { p { "No sync recorded yet." } } @else {
                // Each entry is a revision applied (history records only
                // syncs that succeeded): who started it, and for a rollback or
                // a lifted pin, who and why.
                table {
                    thead { tr { th { "ID" } th { "Revision" } th { "Time" } th { "Initiator" } th { "By" } th { "Reason" } th { "Hooks" } } }
                    tbody {
                        @for entry in history.iter().rev() {
                            tr {
                                td .number { @if entry.id > 0 { (entry.id) } }
                                td { code { (entry.revision) } }
                                td { (entry.time) }
                                td { (entry.initiator.as_str()) }
                                td { (entry.by.as_deref().unwrap_or("")) }
                                td .wrap { (entry.reason.as_deref().unwrap_or("")) }
                                td .number { (entry.hooks.len()) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn events(live: &Live) -> Markup {
    html! {
        section #events {
            h3 { "Events" }
            @if live.events.is_empty() { p { "No Events (Kubernetes keeps them for an hour)." } } @else {
                table {
                    thead { tr { th { "Last seen" } th { "Type" } th { "Reason" } th { "Message" } th { "Count" } } }
                    tbody {
                        @for event in &live.events {
                            tr {
                                td { (last_seen(event)) }
                                td { (event.type_.as_deref().unwrap_or("")) }
                                td { (event.reason.as_deref().unwrap_or("")) }
                                td .wrap { (event.message.as_deref().unwrap_or("")) }
                                td .number { (event.series.as_ref().and_then(|s| s.count).or(event.count).unwrap_or(1)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn windows(windows: &[BreakGlass]) -> Markup {
    html! {
        section #windows {
            h3 { "Break-glass windows" }
            @if windows.is_empty() { p { "None." } } @else {
                ul {
                    @for window in windows {
                        @let (ns, name) = (window.metadata.namespace.as_deref().unwrap_or_default(), window.metadata.name.as_deref().unwrap_or_default());
                        li { a href={"break-glass/" (ns) "/" (name)} { (name) } " — "
                             (crate::windows::phase_word(window)) " — " (window.spec.reason) }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_names_who_rolled_back_and_why_and_no_result_it_does_not_know() {
        let app: Application = serde_json::from_value(serde_json::json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "team-a"},
            "spec": {"source": {"repoURL": "file:///r"}, "destination": {"namespace": "shop"}},
            "status": {"history": [
                {"id": 1, "revision": "aaa", "time": "2026-12-01T00:00:00Z", "initiator": "automated"},
                {"id": 2, "revision": "bbb", "time": "2026-12-02T00:00:00Z", "initiator": "rollback",
                 "by": "alice", "reason": "bad release"}]}
        }))
        .unwrap();
        let html = history(&app).into_string();
        assert!(html.contains("<td>alice</td>"), "{html}");
        assert!(html.contains("bad release"), "{html}");
        assert!(!html.contains("Synced"), "{html}");
        // Newest first.
        assert!(
            html.find("bbb").unwrap() < html.find("aaa").unwrap(),
            "{html}"
        );
    }
}
