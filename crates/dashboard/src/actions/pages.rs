//! The actions as HTML: the buttons of an app's and a window's page, the
//! confirmation pages (what will happen, as whom, one form), the dry run's
//! plan and the page of an action that did not happen. Every link and form
//! is relative to the page's `<base>`; every value is escaped by maud.

use std::time::SystemTime;

use kube::ResourceExt;
use maud::{Markup, html};
use tether_controller::api::{Application, BreakGlass};
use tether_controller::sync::preview::Preview;
use tether_core::Action;
use tether_core::window::WindowPhase;

use super::form::{DEFAULT_TTL, MAX_TTL};

/// The buttons of an app's page. Each opens a confirmation page, which
/// carries its own form token; `token` is the user's, for a slot that
/// would post directly.
pub fn app_actions(app: &Application, _token: &str) -> Markup {
    let at = app_path(app);
    html! {
        nav.actions aria-label="Actions" {
            a #sync-now href={ (at) "/sync" } { "Sync now" } " "
            a #dry-run href={ (at) "/dry-run" } { "Dry run" } " "
            a #refresh href={ (at) "/refresh" } { "Refresh" } " "
            a #open-window href={ (at) "/break-glass" } { "Open break-glass window" }
        }
    }
}

/// The buttons of an open window's page (none once it is not open).
pub fn window_actions(window: &BreakGlass, _token: &str) -> Markup {
    let open = window
        .times()
        .is_ok_and(|times| times.phase(SystemTime::now()) == WindowPhase::Open);
    let at = window_path(window);
    html! {
        @if open {
            nav.actions aria-label="Actions" {
                a #extend-window href={ (at) "/extend" } { "Extend" } " "
                a #close-window href={ (at) "/close" } { "Close" } " "
                a #adopt-window href={ (at) "/adopt" } { "Adopt into Git" }
            }
        }
    }
}

/// The outcome of the action that led to this page (`?done=`).
pub fn flash(done: Option<&str>) -> Markup {
    html! {
        @if let Some(done) = done.filter(|d| !d.is_empty()) {
            p #flash role="status" { (done) }
        }
    }
}

/// `apps/NS/NAME`, relative to the base.
pub fn app_path(app: &Application) -> String {
    format!(
        "apps/{}/{}",
        app.namespace().unwrap_or_default(),
        app.name_any()
    )
}

/// `break-glass/NS/NAME`, relative to the base.
pub fn window_path(window: &BreakGlass) -> String {
    format!(
        "break-glass/{}/{}",
        window.namespace().unwrap_or_default(),
        window.name_any()
    )
}

pub use crate::page::layout;

/// What a confirmation page says and posts.
pub struct Confirm<'a> {
    pub base: &'a str,
    pub title: &'a str,
    /// Exactly what will happen.
    pub what: Markup,
    pub user: &'a str,
    /// Where the form posts, relative to the base.
    pub action: &'a str,
    /// The form's id (`form#open-window`, …).
    pub form: &'a str,
    pub token: &'a str,
    /// The form's own fields.
    pub fields: Markup,
    /// Where "cancel" goes, relative to the base.
    pub back: &'a str,
}

pub fn confirm(page: &Confirm) -> Markup {
    let body = html! {
        div.what { (page.what) }
        p.as { "You act as " strong { (page.user) } ": the API server authorizes this as you and its audit log names you." }
        form id=(page.form) method="post" action=(page.action) {
            input type="hidden" name="token" value=(page.token);
            (page.fields)
            p {
                button #confirm type="submit" { "Confirm: " (page.title) } " "
                a href=(page.back) { "Cancel" }
            }
        }
    };
    layout(page.base, page.title, body)
}

/// The fields of the form that opens a window.
pub fn open_fields() -> Markup {
    html! {
        p { label { "Reason (required: an incident reference and a sentence)" br;
            textarea name="reason" required rows="2" cols="60" placeholder="INC-1234: checkout 500s" {} } }
        p { label { "Scope: one Kind/name per line (empty: the whole application)" br;
            textarea name="scope" rows="3" cols="60" placeholder="Deployment/web" {} } }
        p { label { "Duration (e.g. 30m, 2h; at most " (hours(MAX_TTL)) ")" br;
            input type="text" name="duration" value=(DEFAULT_TTL); } }
    }
}

/// The fields of the form that extends a window.
pub fn extend_fields() -> Markup {
    html! {
        p { label { "Reason for the extension (required)" br;
            textarea name="reason" required rows="2" cols="60" {} } }
        p { label { "Duration from now (at most " (hours(MAX_TTL)) ")" br;
            input type="text" name="duration" value=(DEFAULT_TTL); } }
    }
}

/// The fields of the form that closes a window.
pub fn close_fields() -> Markup {
    html! {
        fieldset {
            legend { "Resolve" }
            label { input type="radio" name="resolve" value="revert" checked; " revert: self-heal converges the scope back to Git now" } br;
            label { input type="radio" name="resolve" value="adopt"; " adopt: commit the window's changes into Git first, then close" }
        }
    }
}

fn hours(duration: std::time::Duration) -> String {
    format!("{}h", duration.as_secs() / 3600)
}

/// What a sync would do to `preview`'s object, in the sync's words.
pub fn action_of(preview: &Preview) -> Action {
    match &preview.diff {
        None => Action::Created,
        Some(_) if preview.changes() => Action::Configured,
        Some(_) => Action::Unchanged,
    }
}

/// The dry run's plan: each object, what a sync would do, and the fields
/// it would change. A Secret's fields are named, never valued.
pub fn plan(base: &str, app: &str, commit: &str, back: &str, previews: &[Preview]) -> Markup {
    let body = html! {
        p #plan-summary { "A sync of Application " (app) " at " code { (commit) } " would do this; nothing was applied." }
        table #plan {
            thead { tr { th { "Object" } th { "Action" } th { "Changed fields" } } }
            tbody {
                @for preview in previews {
                    tr data-object=(preview.id.to_string()) {
                        td { (preview.id.to_string()) }
                        td.action { (action_of(preview).as_str()) }
                        td { ul {
                            @for field in preview.diff.iter().flat_map(|d| &d.fields) {
                                li {
                                    code { (field.path.to_string()) }
                                    @if preview.id.kind != "Secret" {
                                        ": " (value(field.live.as_ref())) " → " (value(field.desired.as_ref()))
                                    }
                                }
                            }
                        } }
                    }
                }
            }
        }
        p { "Pruning is not previewed: the sync's own plan decides it against the objects it tracks." }
        p { a href=(back) { "Back to " (app) } }
    };
    layout(base, &format!("Dry run of {app}"), body)
}

fn value(value: Option<&serde_json::Value>) -> String {
    value.map_or("(none)".to_string(), |v| v.to_string())
}

/// The page of an action that did not happen.
pub fn failure(base: &str, message: &str, back: &str) -> Markup {
    let body = html! {
        p #error role="alert" { (message) }
        p { "Nothing was changed." }
        p { a href=(back) { "Back" } }
    };
    layout(base, "Not done", body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app() -> Application {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"source": {"repoURL": "file:///srv/git/shop.git"},
                     "destination": {"namespace": "shop"}}
        }))
        .unwrap()
    }

    #[test]
    fn an_apps_buttons_link_relatively_to_their_confirmation_pages() {
        let html = app_actions(&app(), "t").into_string();
        for (id, href) in [
            ("sync-now", "apps/shop/web/sync"),
            ("dry-run", "apps/shop/web/dry-run"),
            ("refresh", "apps/shop/web/refresh"),
            ("open-window", "apps/shop/web/break-glass"),
        ] {
            assert!(
                html.contains(&format!("id=\"{id}\" href=\"{href}\"")),
                "{id}: {html}"
            );
        }
    }

    #[test]
    fn a_confirmation_says_who_acts_and_carries_the_token_and_a_confirm_button() {
        let html = confirm(&Confirm {
            base: "/ui/",
            title: "Sync now",
            what: html! { p { "sync <shop/web>" } },
            user: "alice",
            action: "apps/shop/web/sync",
            form: "sync-now",
            token: "abc",
            fields: html! {},
            back: "apps/shop/web",
        })
        .into_string();
        assert!(html.contains("<base href=\"/ui/\">"), "{html}");
        assert!(html.contains("<strong>alice</strong>"), "{html}");
        assert!(html.contains("name=\"token\" value=\"abc\""), "{html}");
        assert!(html.contains("id=\"confirm\""), "{html}");
        assert!(html.contains("sync &lt;shop/web&gt;"), "{html}");
    }

    #[test]
    fn the_flash_shows_only_an_outcome_escaped() {
        assert_eq!(flash(None).into_string(), "");
        assert_eq!(
            flash(Some("<b>done</b>")).into_string(),
            "<p id=\"flash\" role=\"status\">&lt;b&gt;done&lt;/b&gt;</p>"
        );
    }
}
