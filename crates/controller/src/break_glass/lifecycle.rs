//! A window's life: opened, extended, warned before expiry, expired or
//! closed. [`plan`] decides (pure: the window, whether its app exists, the
//! time, the longest grant allowed); [`reconcile`] writes the status, sends
//! the events, checks the window's audit log with the controller's key
//! ([`super::audit::check`]) and looks again at the next deadline. Writing
//! `Expired` or `Closed` wakes the app (its controller watches windows),
//! which resumes self-heal for the scope.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action as Next;
use kube::runtime::events::EventType;

use crate::recorder::Recorder;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tether_core::ConditionStatus;
use tether_core::notice::EventReason;
use tether_core::window::WindowPhase;

use super::audit;
use super::key::AuditKey;
use crate::api::application::Condition;
use crate::api::break_glass::{Resolution, format_time};
use crate::api::{Application, BreakGlass};

/// Field manager of the lifecycle status fields.
const MANAGER: &str = "tether-break-glass";
/// The condition every window carries: is self-heal suspended by it?
pub const OPEN_CONDITION: &str = "Open";

/// What the lifecycle writes into a window's status.
#[derive(Debug, Clone, PartialEq)]
pub struct Lifecycle {
    pub phase: WindowPhase,
    pub expires_at: Option<String>,
    pub warned_at: Option<String>,
    pub extensions_seen: usize,
    pub condition: Condition,
}

/// One event to send about the window.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub warning: bool,
    pub reason: EventReason,
    pub note: String,
}

/// The next status, the events that go with it, and when to look again.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub lifecycle: Lifecycle,
    pub notices: Vec<Notice>,
    pub next: Option<SystemTime>,
}

/// Decides a window's status and events at `now`; a window granted longer
/// than `cap` at once is Invalid.
pub fn plan(window: &BreakGlass, app_exists: bool, now: SystemTime, cap: Duration) -> Plan {
    let status = window.status.clone().unwrap_or_default();
    let previous = status.phase;
    let name = window.name_any();
    if !app_exists {
        let app = &window.spec.application;
        return invalid(
            previous,
            format!(
                "BreakGlass {name}: Application {app} does not exist in this namespace; nothing is suspended"
            ),
            now,
        );
    }
    let times = match window.checked_times(cap) {
        Ok(times) => times,
        Err(error) => return invalid(previous, format!("{error}; nothing is suspended"), now),
    };
    let phase = times.phase(now);
    let words = Words::of(window);
    let mut notices = words.granted(previous, status.extensions_seen);
    // An extension postpones the warning: warn again before the new expiry.
    let extended = status.extensions_seen < window.spec.extensions.len();
    let mut warned_at = status.warned_at.clone().filter(|_| !extended);
    if phase == WindowPhase::Open && now >= times.warn_at() && warned_at.is_none() {
        notices.push(words.expiring());
        warned_at = Some(format_time(now));
    }
    let ending = match words.ending(phase, previous) {
        Ok(ending) => ending,
        Err(message) => return invalid(previous, message, now),
    };
    notices.extend(ending.told);
    let condition = open_condition(ending.open, ending.reason, ending.message, now);
    let keep_transition = status
        .conditions
        .iter()
        .find(|c| {
            c.type_ == OPEN_CONDITION
                && c.status == condition.status
                && c.reason == condition.reason
        })
        .and_then(|c| c.last_transition_time.clone());
    let condition = Condition {
        last_transition_time: keep_transition.or(condition.last_transition_time),
        ..condition
    };
    Plan {
        lifecycle: Lifecycle {
            phase,
            expires_at: Some(words.expires),
            warned_at,
            extensions_seen: window.spec.extensions.len(),
            condition,
        },
        notices,
        next: times.next_deadline(now),
    }
}

/// The plan of a window that suspends nothing, for `message`: told once,
/// when it becomes Invalid.
fn invalid(previous: Option<WindowPhase>, message: String, now: SystemTime) -> Plan {
    let invalid = WindowPhase::Invalid;
    let notices = match previous {
        Some(WindowPhase::Invalid) => Vec::new(),
        _ => vec![Notice {
            warning: true,
            reason: EventReason::BreakGlassInvalid,
            note: message.clone(),
        }],
    };
    Plan {
        lifecycle: Lifecycle {
            phase: invalid,
            expires_at: None,
            warned_at: None,
            extensions_seen: 0,
            condition: open_condition(false, invalid.as_str(), message, now),
        },
        notices,
        next: None,
    }
}

/// Condition `Open`, changed at `now`.
fn open_condition(open: bool, reason: &str, message: String, now: SystemTime) -> Condition {
    Condition {
        type_: OPEN_CONDITION.into(),
        status: ConditionStatus::from_bool(open),
        reason: reason.into(),
        message,
        last_transition_time: Some(format_time(now)),
    }
}

/// Condition `Open` of a window in its phase, and the event that tells
/// the phase began (none while it stays in it).
struct Ending {
    open: bool,
    reason: &'static str,
    message: String,
    told: Option<Notice>,
}

/// What the events and the condition say of one valid window.
struct Words<'a> {
    window: &'a BreakGlass,
    /// What it suspends self-heal for ([`scope`]).
    scope: String,
    expires: String,
}

impl<'a> Words<'a> {
    fn of(window: &'a BreakGlass) -> Self {
        Words {
            window,
            scope: scope(window),
            expires: window.expires_at().to_string(),
        }
    }

    /// The window, what it suspends self-heal for, and when it expires.
    fn parts(&self) -> (&'a BreakGlass, &str, &str) {
        (self.window, &self.scope, &self.expires)
    }

    /// The opening (when the window is new) and each extension since the
    /// first `seen`.
    fn granted(&self, previous: Option<WindowPhase>, seen: usize) -> Vec<Notice> {
        let (window, scope, expires) = self.parts();
        let spec = &window.spec;
        let opened = previous.is_none().then(|| Notice {
            warning: false,
            reason: EventReason::BreakGlassOpened,
            note: format!(
                "{} opened break-glass for {scope} until {expires}: {}",
                spec.opened_by.username, spec.reason
            ),
        });
        let extended = spec.extensions.iter().skip(seen).map(|extension| Notice {
            warning: false,
            reason: EventReason::BreakGlassExtended,
            note: format!(
                "{} extended break-glass for {scope} to {}: {}",
                extension.by, extension.expires_at, extension.reason
            ),
        });
        opened.into_iter().chain(extended).collect()
    }

    /// The warning before the window expires.
    fn expiring(&self) -> Notice {
        let (window, scope, expires) = self.parts();
        let (name, app) = (window.name_any(), &window.spec.application);
        Notice {
            warning: true,
            reason: EventReason::BreakGlassExpiring,
            note: format!(
                "break-glass for {scope} expires at {expires}; self-heal then reverts what was not adopted (tether adopt {app}) — extend with tether break-glass extend {name}"
            ),
        }
    }

    /// What condition `Open` says in `phase`, and the event of an ending
    /// first seen now; an error for a window that cannot be in `phase`.
    fn ending(&self, phase: WindowPhase, previous: Option<WindowPhase>) -> Result<Ending, String> {
        let (window, scope, expires) = self.parts();
        let spec = &window.spec;
        let ended = |reason: EventReason, message: String, note: String| Ending {
            open: false,
            reason: phase.as_str(),
            message,
            told: (previous != Some(phase)).then_some(Notice {
                warning: reason == EventReason::BreakGlassExpired,
                reason,
                note,
            }),
        };
        match phase {
            WindowPhase::Open => Ok(Ending {
                open: true,
                reason: "Opened",
                message: format!(
                    "self-heal suspended for {scope} until {expires} (opened by {}: {})",
                    spec.opened_by.username, spec.reason
                ),
                told: None,
            }),
            WindowPhase::Expired => Ok(ended(
                EventReason::BreakGlassExpired,
                format!("expired at {expires}; self-heal resumed"),
                format!("break-glass for {scope} expired at {expires}; self-heal resumed"),
            )),
            WindowPhase::Closed => {
                // Only a window with a closing is ever Closed.
                let Some(close) = spec.close.as_ref() else {
                    return Err(format!(
                        "BreakGlass {}: Closed without spec.close",
                        window.name_any()
                    ));
                };
                let resolve = match close.resolve {
                    Resolution::Adopt => "adopted into Git",
                    Resolution::Revert => "reverted by self-heal",
                };
                Ok(ended(
                    EventReason::BreakGlassClosed,
                    format!("closed by {} at {}; changes {resolve}", close.by, close.at),
                    format!(
                        "{} closed break-glass for {scope}; changes {resolve}",
                        close.by
                    ),
                ))
            }
            // Valid times never give this phase; checked before.
            WindowPhase::Invalid => Err(format!("BreakGlass {}: invalid", window.name_any())),
        }
    }
}

/// `Application web` or `Deployment web, ConfigMap settings of Application web`.
fn scope(window: &BreakGlass) -> String {
    let app = format!("Application {}", window.spec.application);
    if window.spec.resources.is_empty() {
        return app;
    }
    let resources: Vec<String> = window
        .spec
        .resources
        .iter()
        .map(|r| format!("{} {}", r.kind, r.name))
        .collect();
    format!("{} of {app}", resources.join(", "))
}

/// The notification for a window's event, when people are told about
/// that kind (an extension is an Event only): about the window's
/// Application (`app`, when it exists), keyed by the window's uid, the
/// event and its phase, so a retried delivery is recognised.
pub fn notification(
    window: &BreakGlass,
    app: Option<&Application>,
    notice: &Notice,
    now: SystemTime,
) -> Option<tether_core::notice::Notice> {
    use tether_core::notice::{NoticeKind, Severity};
    let kind = match notice.reason {
        EventReason::BreakGlassOpened => NoticeKind::BreakGlassOpened,
        EventReason::BreakGlassExpiring => NoticeKind::BreakGlassExpiring,
        EventReason::BreakGlassExpired => NoticeKind::BreakGlassExpired,
        EventReason::BreakGlassClosed => NoticeKind::BreakGlassClosed,
        _ => return None,
    };
    let uid = window.metadata.uid.clone().unwrap_or_default();
    Some(tether_core::notice::Notice {
        kind,
        severity: if notice.warning {
            Severity::Warning
        } else {
            Severity::Normal
        },
        namespace: window.namespace().unwrap_or_default(),
        name: window.spec.application.clone(),
        labels: app
            .map(|app| app.labels().clone().into_iter().collect())
            .unwrap_or_default(),
        message: format!("BreakGlass {}: {}", window.name_any(), notice.note),
        revision: None,
        state: app.and_then(|app| app.status.as_ref()?.state),
        previous_state: None,
        at: format_time(now),
        key: format!("{uid}/{kind}/{}", window.expires_at()),
    })
}

/// What window reconciles share.
pub struct WindowContext {
    pub client: Client,
    pub recorder: std::sync::Arc<Recorder>,
    /// Break-glass opened, expiring, expired and closed are notified.
    pub notifier: crate::notify::Notifier,
    /// The longest grant a window may have (`tether run --max-break-glass-ttl`).
    pub cap: Duration,
    /// The controller's namespace, where audit records live.
    pub audit_namespace: String,
    pub audit_key: AuditKey,
}

/// Why a window could not be reconciled.
#[derive(Debug, thiserror::Error)]
#[error("BreakGlass {window}: {}", tether_cluster::error::describe(.error))]
pub struct WindowReconcileError {
    window: String,
    error: kube::Error,
}

/// Brings one window's status up to date and sends its events.
pub async fn reconcile(
    window: Arc<BreakGlass>,
    ctx: Arc<WindowContext>,
) -> Result<Next, WindowReconcileError> {
    let namespace = window.namespace().unwrap_or_default();
    let failed = |error| WindowReconcileError {
        window: format!("{namespace}/{}", window.name_any()),
        error,
    };
    let apps: Api<Application> = Api::namespaced(ctx.client.clone(), &namespace);
    let app = apps
        .get_opt(&window.spec.application)
        .await
        .map_err(failed)?;
    let now = SystemTime::now();
    let plan = plan(&window, app.is_some(), now, ctx.cap);
    let current = window.status.clone().unwrap_or_default();
    let unchanged = current.phase == Some(plan.lifecycle.phase)
        && current.expires_at == plan.lifecycle.expires_at
        && current.warned_at == plan.lifecycle.warned_at
        && current.extensions_seen == plan.lifecycle.extensions_seen
        && current.conditions.first() == Some(&plan.lifecycle.condition);
    if !unchanged {
        let api: Api<BreakGlass> = Api::namespaced(ctx.client.clone(), &namespace);
        let lifecycle = &plan.lifecycle;
        let patch = json!({
            "apiVersion": "tether.dev/v1alpha1",
            "kind": "BreakGlass",
            "status": {
                "phase": lifecycle.phase,
                "expiresAt": lifecycle.expires_at,
                "warnedAt": lifecycle.warned_at,
                "extensionsSeen": lifecycle.extensions_seen,
                "conditions": [lifecycle.condition],
            }
        });
        api.patch_status(
            &window.name_any(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(failed)?;
    }
    for notice in &plan.notices {
        let type_ = if notice.warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        let (about_window, reason) = (window.object_ref(&()), notice.reason);
        let note = notice.note.clone();
        ctx.recorder
            .tell(&about_window, type_, reason, "BreakGlass", note)
            .await;
        // The Application's own Events tell its break-glass story too.
        if let Some(app) = &app {
            let note = format!("BreakGlass {}: {}", window.name_any(), notice.note);
            ctx.recorder
                .tell(&app.object_ref(&()), type_, reason, "BreakGlass", note)
                .await;
        }
        if let Some(notification) = notification(&window, app.as_ref(), notice, now) {
            ctx.notifier.notify(notification);
        }
        tracing::info!(window = %window.name_any(), reason = %notice.reason, note = %notice.note, "break-glass");
    }
    check_audit_log(&window, &ctx).await.map_err(failed)?;
    Ok(match plan.next {
        Some(at) => {
            Next::requeue(at.duration_since(now).unwrap_or_default() + Duration::from_millis(100))
        }
        None => Next::await_change(),
    })
}

/// Checks the window's audit log with the key; writes a changed verdict to
/// its status, with a warning Event when the log is broken.
async fn check_audit_log(window: &BreakGlass, ctx: &WindowContext) -> Result<(), kube::Error> {
    let checked = audit::check(
        &ctx.client,
        &ctx.audit_namespace,
        window,
        Some(&ctx.audit_key),
    )
    .await?;
    let verdict = audit::chain_status(&ctx.audit_namespace, &checked.report);
    let current = window.status.as_ref().and_then(|s| s.audit_chain.as_ref());
    if current == Some(&verdict) {
        return Ok(());
    }
    // The warning goes out before the verdict is kept: a controller that
    // stops in between warns again rather than never.
    if checked.report.state.is_broken() {
        let note = format!("audit log {}", verdict.message);
        tracing::warn!(window = %window.name_any(), %note, "break-glass audit log broken");
        ctx.recorder
            .tell(
                &window.object_ref(&()),
                EventType::Warning,
                EventReason::AuditLogBroken,
                "VerifyAuditLog",
                note,
            )
            .await;
    }
    audit::write_verdict(&ctx.client, window, &verdict).await
}

pub fn error_policy(
    _window: Arc<BreakGlass>,
    error: &WindowReconcileError,
    _ctx: Arc<WindowContext>,
) -> Next {
    tracing::warn!(%error, "break-glass reconcile failed");
    Next::requeue(Duration::from_secs(5))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::break_glass::{BreakGlassStatus, Closing, Extension, parse_time, test_window};

    /// The unit tests' window, by alice alone, for Deployment `web`.
    fn window(expires: &str) -> BreakGlass {
        let mut window = test_window(expires);
        window.spec.opened_by.groups.clear();
        window.spec.resources =
            serde_json::from_value(serde_json::json!([{"kind": "Deployment", "name": "web"}]))
                .unwrap();
        window
    }

    const CAP: Duration = tether_core::window::DEFAULT_MAX_TTL;

    fn at(text: &str) -> SystemTime {
        parse_time(text).unwrap()
    }

    fn with_phase(mut window: BreakGlass, phase: WindowPhase) -> BreakGlass {
        window.status = Some(BreakGlassStatus {
            phase: Some(phase),
            ..BreakGlassStatus::default()
        });
        window
    }

    /// The plan at `now` for a window whose app exists.
    /// An open window expiring at 12:00, extended by bob at 11:58 to
    /// `expires_at` for `reason`.
    fn extended_by_bob_to(expires_at: &str, reason: &str) -> BreakGlass {
        let mut open = with_phase(window("2026-12-02T12:00:00Z"), WindowPhase::Open);
        open.spec.extensions.push(Extension {
            by: "bob".into(),
            at: "2026-12-02T11:58:00Z".into(),
            expires_at: expires_at.into(),
            reason: reason.into(),
        });
        open
    }

    fn plan_at(window: &BreakGlass, now: &str) -> Plan {
        plan(window, true, at(now), CAP)
    }

    fn reasons(plan: &Plan) -> Vec<&str> {
        plan.notices.iter().map(|n| n.reason.as_str()).collect()
    }

    #[test]
    fn a_new_window_is_announced_with_who_why_and_until_when() {
        let plan = plan_at(&window("2026-12-02T12:00:00Z"), "2026-12-02T10:00:01Z");
        assert_eq!(plan.lifecycle.phase, WindowPhase::Open);
        assert_eq!(reasons(&plan), ["BreakGlassOpened"]);
        assert_eq!(
            plan.notices[0].note,
            "alice opened break-glass for Deployment web of Application web until 2026-12-02T12:00:00Z: INC-1234: checkout down"
        );
        assert_eq!(plan.next, Some(at("2026-12-02T11:55:00Z")));
    }

    #[test]
    fn a_window_warns_once_before_it_expires() {
        let open = with_phase(window("2026-12-02T12:00:00Z"), WindowPhase::Open);
        let plan = plan_at(&open, "2026-12-02T11:56:00Z");
        assert_eq!(reasons(&plan), ["BreakGlassExpiring"]);
        assert!(plan.lifecycle.warned_at.is_some());
        assert_eq!(plan.next, Some(at("2026-12-02T12:00:00Z")));
    }

    #[test]
    fn an_expired_window_says_so_once_and_looks_no_more() {
        let open = with_phase(window("2026-12-02T12:00:00Z"), WindowPhase::Open);
        let plan = plan_at(&open, "2026-12-02T12:00:00Z");
        assert_eq!(plan.lifecycle.phase, WindowPhase::Expired);
        assert!(reasons(&plan).contains(&"BreakGlassExpired"));
        assert_eq!(plan.lifecycle.condition.status, ConditionStatus::False);
        assert_eq!(plan.next, None);
        let expired = with_phase(window("2026-12-02T12:00:00Z"), WindowPhase::Expired);
        let again = plan_at(&expired, "2026-12-02T12:00:10Z");
        assert!(!reasons(&again).contains(&"BreakGlassExpired"));
    }

    #[test]
    fn an_extension_is_announced_with_its_author() {
        let open = extended_by_bob_to("2026-12-02T14:00:00Z", "still mitigating");
        let plan = plan_at(&open, "2026-12-02T12:30:00Z");
        assert_eq!(plan.lifecycle.phase, WindowPhase::Open);
        assert_eq!(reasons(&plan), ["BreakGlassExtended"]);
        assert!(plan.notices[0].note.starts_with("bob extended"));
        assert_eq!(plan.lifecycle.extensions_seen, 1);
    }

    #[test]
    fn a_closed_window_records_who_closed_it_and_how() {
        let mut open = with_phase(window("2026-12-02T12:00:00Z"), WindowPhase::Open);
        open.spec.close = Some(Closing {
            by: "alice".into(),
            at: "2026-12-02T11:00:00Z".into(),
            resolve: Resolution::Revert,
        });
        let plan = plan_at(&open, "2026-12-02T11:00:01Z");
        assert_eq!(plan.lifecycle.phase, WindowPhase::Closed);
        assert_eq!(reasons(&plan), ["BreakGlassClosed"]);
        assert_eq!(
            plan.lifecycle.condition.message,
            "closed by alice at 2026-12-02T11:00:00Z; changes reverted by self-heal"
        );
    }

    #[test]
    fn a_window_for_an_unknown_app_is_invalid_and_suspends_nothing() {
        let plan = plan(
            &window("2026-12-02T12:00:00Z"),
            false,
            at("2026-12-02T10:00:01Z"),
            CAP,
        );
        assert_eq!(plan.lifecycle.phase, WindowPhase::Invalid);
        assert_eq!(
            plan.notices[0].note,
            "BreakGlass inc-1234: Application web does not exist in this namespace; nothing is suspended"
        );
    }

    #[test]
    fn a_window_past_the_cap_is_invalid_and_suspends_nothing() {
        let plan = plan_at(&window("2999-01-01T00:00:00Z"), "2026-12-02T10:00:01Z");
        assert_eq!(plan.lifecycle.phase, WindowPhase::Invalid);
        assert_eq!(reasons(&plan), ["BreakGlassInvalid"]);
        assert!(
            plan.notices[0].note.contains("longer than the cap of 1d"),
            "{}",
            plan.notices[0].note
        );
        // An extension is a grant of its own: at most the cap from when it
        // was made, and made before the window expired.
        let open = extended_by_bob_to("2026-12-04T11:58:00Z", "forever");
        let plan = plan_at(&open, "2026-12-02T12:30:00Z");
        assert_eq!(plan.lifecycle.phase, WindowPhase::Invalid);
        assert!(plan.notices[0].note.contains("extension 1 lasts 2d"));
    }

    #[test]
    fn a_window_claiming_a_system_group_is_invalid() {
        let mut masters = window("2026-12-02T12:00:00Z");
        masters.spec.opened_by.groups = vec!["system:masters".into()];
        let plan = plan_at(&masters, "2026-12-02T10:00:01Z");
        assert_eq!(plan.lifecycle.phase, WindowPhase::Invalid);
        assert!(plan.notices[0].note.contains("\"system:masters\""));
    }

    #[test]
    fn a_malformed_expiry_makes_the_window_invalid() {
        let plan = plan_at(&window("soon"), "2026-12-02T10:00:01Z");
        assert_eq!(plan.lifecycle.phase, WindowPhase::Invalid);
        assert!(plan.notices[0].note.contains("spec.expiresAt: \"soon\""));
    }
}
