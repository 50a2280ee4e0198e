//! The overview as HTML: the whole page, and the live part of it that the
//! page's script swaps in when the cache changes.
//!
//! maud escapes every interpolated value, so nothing an Application holds
//! (a name, a project, a revision) can become markup.

use maud::{DOCTYPE, Markup, PreEscaped, html};
use tether_controller::report::status::NotSyncedReason;
use tether_core::{HealthStatus, OperationalState, SyncStatus};

use crate::overview::{Headline, Matrix, Row, SortKey, View, age, headline, matrix};

/// The stylesheet, in the binary: the page works offline.
pub const STYLE: &str = include_str!("assets/dashboard.css");
/// The live-update script, in the binary: no framework, no CDN.
pub const SCRIPT: &str = include_str!("assets/live.js");

/// What a page shows: the apps, what the reader asked for, the time.
pub struct Overview<'a> {
    /// Every app in the cache, for the counts.
    pub rows: &'a [Row<'a>],
    pub view: &'a View,
    /// Now, RFC 3339, for the ages.
    pub now: &'a str,
    /// `namespace shop` or `all namespaces`.
    pub scope: &'a str,
    /// Where the dashboard is served (`/`, or `/ui/` in the controller):
    /// the page's `<base>`, so every link in it is relative.
    pub base: &'a str,
}

/// The whole overview page.
pub fn page(overview: &Overview) -> Markup {
    let view = overview.view;
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(overview.base, overview.scope))
            body {
                header {
                    h1 { "Tether" }
                    nav aria-label="Dashboard" { a href="break-glass" { "Break-glass windows" } }
                    p { "Applications in " (overview.scope) ". "
                        span #connection role="status" aria-live="polite" { "Reload to update." } }
                }
                form method="get" action="./" role="search" {
                    label { "Filter " input type="search" name="q" value=(view.q) placeholder="name, namespace, project, revision"; }
                    label { "State "
                        select name="state" {
                            option value="" { "any" }
                            @for state in OperationalState::ALL {
                                option value=(state.as_str()) selected[view.state == Some(*state)] { (state.as_str()) }
                            }
                        }
                    }
                    @if let Some(sync) = view.sync { input type="hidden" name="sync" value=(sync.as_str()); }
                    @if let Some(health) = view.health { input type="hidden" name="health" value=(health.as_str()); }
                    input type="hidden" name="sort" value=(view.sort.as_text());
                    button type="submit" { "Show" }
                    " " a href="./" { "Clear" }
                }
                (live(overview))
            }
        }
    }
}

/// The part of the page that follows the cache: the headline, the matrix
/// and the table.
pub fn live(overview: &Overview) -> Markup {
    let shown = overview.view.select(overview.rows);
    html! {
        main #live data-live={"live?" (overview.view.query_with(overview.view.sort))} {
            (headline_section(&headline(overview.rows)))
            (matrix_section(&matrix(overview.rows)))
            (table(&shown, overview))
        }
    }
}

fn headline_section(counts: &Headline) -> Markup {
    html! {
        section aria-labelledby="states" {
            h2 #states { "Operational states" }
            ul .headline {
                @for state in OperationalState::ALL {
                    li .{"state " (class(Some(*state)))} data-state=(state.as_str()) {
                        a href={"./?state=" (state.as_str())} {
                            span .count { (counts.count(*state)) }
                            " " (badge(Some(*state)))
                        }
                    }
                }
                li .{"state " (class(None))} {
                    span .count { (counts.not_compared) } " " (badge(None))
                }
            }
        }
    }
}

fn matrix_section(cells: &Matrix) -> Markup {
    html! {
        section aria-labelledby="matrix" {
            h2 #matrix { "Sync × Health" }
            table .matrix {
                thead { tr {
                    th scope="col" { "Sync \\ Health" }
                    @for health in HealthStatus::ALL { th scope="col" { (health.as_str()) } }
                } }
                tbody {
                    @for sync in SyncStatus::ALL {
                        tr {
                            th scope="row" { (sync.as_str()) }
                            @for health in HealthStatus::ALL {
                                @let count = cells.count(*sync, *health);
                                td .empty[count == 0] {
                                    @if count == 0 { "0" } @else {
                                        a href={"./?sync=" (sync.as_str()) "&health=" (health.as_str())} { (count) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The table of the selected apps; headings are sort links that keep the
/// filters.
fn table(shown: &[Row], overview: &Overview) -> Markup {
    let view = overview.view;
    html! {
        section aria-labelledby="apps" {
            h2 #apps { "Applications (" (shown.len()) " of " (overview.rows.len()) ")" }
            table .apps {
                thead { tr {
                    @for &key in SortKey::ALL {
                        @let sort = view.sort.toggled(key);
                        @let current = (view.sort.key == key).then_some(if view.sort.descending { "descending" } else { "ascending" });
                        th scope="col" aria-sort=[current] {
                            a href={"./?" (view.query_with(sort))} {
                                (key.heading())
                                @if let Some(direction) = current { " " (if direction == "descending" { "▼" } else { "▲" }) }
                            }
                        }
                    }
                } }
                tbody {
                    @for row in shown { (table_row(row, overview.now)) }
                }
            }
            @if shown.is_empty() { p { "No Application matches." } }
        }
    }
}

fn table_row(row: &Row, now: &str) -> Markup {
    let dash = || PreEscaped("–");
    html! {
        tr data-app={(row.namespace) "/" (row.name)} {
            th scope="row" { a href={"apps/" (row.namespace) "/" (row.name)} { (row.name) } }
            td { (row.namespace) }
            td { @if let Some(project) = row.project { (project) } @else { (dash()) } }
            td .sync { @if let Some(sync) = row.sync { (sync.as_str()) } @else { (dash()) } }
            td .health { @if let Some(health) = row.health { (health.as_str()) } @else { (dash()) } }
            td .{"state " (class(row.state))} { (badge(row.state)) }
            td .revision { @if let Some(revision) = row.revision { code title=(revision) { (&revision[..revision.len().min(12)]) } } @else { (dash()) } }
            td .number { (row.drift) }
            td { @if let Some(span) = age(row.not_synced_since, now) { (span) } @else { (dash()) } }
            td { @if let Some(span) = age(row.last_sync, now) { (span) " ago" } @else { (dash()) } }
        }
    }
}

/// Every page's head: the stylesheet and live script from the binary, and
/// the `<base>` every link is relative to.
fn head(base: &str, title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            meta name="color-scheme" content="light dark";
            title { "Tether — " (title) }
            base href=(base);
            link rel="stylesheet" href="assets/dashboard.css";
            script src="assets/live.js" defer {}
        }
    }
}

/// A page of the dashboard other than the overview, around `body`: the
/// same head (stylesheet, live script, `<base>`) and a way back.
pub fn layout(base: &str, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(base, title))
            body {
                header {
                    nav aria-label="Dashboard" {
                        a href="./" { "Overview" } " · " a href="break-glass" { "Break-glass" }
                        " " span #connection role="status" aria-live="polite" {}
                    }
                    h1 { (title) }
                }
                main { (body) }
            }
        }
    }
}

/// A state's icon and word: colour is never the only carrier.
pub fn badge(state: Option<OperationalState>) -> Markup {
    let (icon, word) = match state {
        Some(state @ OperationalState::Converged) => ("✔", state.as_str()),
        Some(state @ OperationalState::AppliedButFailing) => ("✖", state.as_str()),
        Some(state @ OperationalState::DriftedOrPending) => ("↻", state.as_str()),
        Some(state @ OperationalState::Broken) => ("⚠", state.as_str()),
        None => ("…", NotSyncedReason::NotCompared.as_str()),
    };
    html! { span .badge { span aria-hidden="true" { (icon) } " " (word) } }
}

/// The CSS class of a state.
pub fn class(state: Option<OperationalState>) -> &'static str {
    match state {
        Some(OperationalState::Converged) => "converged",
        Some(OperationalState::AppliedButFailing) => "failing",
        Some(OperationalState::DriftedOrPending) => "drifted",
        Some(OperationalState::Broken) => "broken",
        None => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::overview::{Query, Sort};
    use std::time::Instant;

    fn synthetic(count: usize) -> Vec<(String, String)> {
        (0..count)
            .map(|i| (format!("app-{i:04}"), format!("team-{}", i % 20)))
            .collect()
    }

    #[test]
    fn a_thousand_apps_render_in_well_under_a_second() {
        let names = synthetic(1000);
        let states = [
            (SyncStatus::Synced, HealthStatus::Healthy),
            (SyncStatus::Synced, HealthStatus::Degraded),
            (SyncStatus::OutOfSync, HealthStatus::Healthy),
            (SyncStatus::OutOfSync, HealthStatus::Missing),
        ];
        let rows: Vec<Row> = names
            .iter()
            .enumerate()
            .map(|(i, (name, namespace))| {
                let (sync, health) = states[i % 4];
                Row {
                    name,
                    namespace,
                    project: Some("default"),
                    sync: Some(sync),
                    health: Some(health),
                    state: OperationalState::of(sync, health),
                    revision: Some("0123456789abcdef0123456789abcdef01234567"),
                    drift: i % 3,
                    not_synced_since: (sync == SyncStatus::OutOfSync)
                        .then_some("2026-12-04T15:00:00Z"),
                    last_sync: Some("2026-12-04T15:30:00Z"),
                }
            })
            .collect();
        let view = View::parse(&Query::default()).unwrap();
        let overview = Overview {
            rows: &rows,
            view: &view,
            now: "2026-12-04T16:00:00Z",
            scope: "all namespaces",
            base: "/",
        };
        let start = Instant::now();
        let html = page(&overview).into_string();
        let took = start.elapsed();
        println!("1,000 apps: {} bytes of HTML in {took:?}", html.len());
        assert_eq!(html.matches("<tr data-app=\"team-").count(), 1000);
        assert!(took.as_millis() < 1000, "{took:?}");
    }

    #[test]
    fn application_text_is_escaped_and_states_carry_words_and_icons() {
        let rows = [Row {
            name: "shop",
            namespace: "team",
            project: Some("<script>alert(1)</script>"),
            sync: Some(SyncStatus::OutOfSync),
            health: Some(HealthStatus::Degraded),
            state: Some(OperationalState::Broken),
            revision: None,
            drift: 2,
            not_synced_since: Some("2026-12-04T14:58:00Z"),
            last_sync: None,
        }];
        let view = View::parse(&Query::default()).unwrap();
        let html = page(&Overview {
            rows: &rows,
            view: &view,
            now: "2026-12-04T16:00:00Z",
            scope: "namespace team",
            base: "/",
        })
        .into_string();
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(html.contains("⚠</span> Broken"), "{html}");
        assert!(html.contains("<td>1h02m</td>"), "{html}");
        assert_eq!(view.sort, Sort::DEFAULT);
    }
}
