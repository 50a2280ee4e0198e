//! `tether status`: the status fields are the dashboard.

mod detail;

use std::process::ExitCode;

use kube::ResourceExt;
use tether_controller::api::Application;
use tether_controller::api::ApplicationStatus;
use tether_controller::api::application::{OtherWriterEntry, condition_with, holds};
use tether_controller::report::status::{
    BACK_OFF_CONDITION, NOT_SYNCED_TOO_LONG_CONDITION, PRUNE_BLOCKED_CONDITION,
    RECONCILED_CONDITION,
};
use tether_core::ConditionStatus::{False, True};
use tether_core::prune::PruneFate;
use tether_core::{HealthStatus, OperationalState, SyncStatus};

use super::columns::aligned;
use super::out::{out, print_as};
use super::selection::Selection;

/// Show Applications' sync, health and operational state: a table of all
/// of them, or for one (`tether status NAME`) the detail — source,
/// resolved revision, conditions with reasons, last operation, drift,
/// orphans and other writers. `-o yaml|json` prints the Applications
/// (a list, also for one) with their status.
///
/// Example: `tether status`, `tether status shop` or `tether status -o json`
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// Output format: table (for one NAME, the detail view), yaml or json.
    #[arg(long, short = 'o', default_value = "table", value_parser = ["table", "json", "yaml"])]
    pub output: String,
}

pub async fn run(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let apps = args.selection.applications().await?;
    match args.output.as_str() {
        "json" | "yaml" => print_as(&apps, &args.output)?,
        _ if args.selection.app.is_some() => {
            for app in &apps {
                out!("{}", detail::detail(app));
            }
        }
        _ => {
            out!("{}", table(&apps));
            out!("{}", other_writers(&apps));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// NAME SYNC HEALTH STATE REVISION DRIFT ORPHANS AGE MESSAGE
fn table(apps: &[Application]) -> String {
    let mut rows = vec![
        [
            "NAME", "SYNC", "HEALTH", "STATE", "REVISION", "DRIFT", "ORPHANS", "AGE", "MESSAGE",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for app in apps {
        // An Application no reconcile has reported on yet shows dashes.
        let word = |word: Option<&'static str>| word.unwrap_or("-").to_string();
        let reported = app.status.as_ref();
        let status = app.status.clone().unwrap_or_default();
        let drifted = status
            .resources
            .iter()
            .filter(|r| r.sync != SyncStatus::Synced)
            .count();
        let revision = status.sync.revision.as_deref().unwrap_or("-");
        let sync = word(reported.map(|s| s.sync.status.as_str()));
        rows.push(vec![
            app.name_any(),
            match not_synced_too_long(&status) {
                Some(mark) => format!("{sync} {mark}"),
                None => sync,
            },
            word(reported.map(|s| s.health.status.as_str())),
            word(status.state.map(OperationalState::as_str)),
            short_revision(revision),
            drifted.to_string(),
            kept_orphans(&status).to_string(),
            age(app),
            message(&status),
        ]);
    }
    aligned(&rows)
}

/// Conditions that name a problem while True, the first holding one shown.
const PROBLEM_CONDITIONS: [&str; 3] = [
    BACK_OFF_CONDITION,
    PRUNE_BLOCKED_CONDITION,
    NOT_SYNCED_TOO_LONG_CONDITION,
];

/// `⚠ 1h02m`: how long the app has not been Synced, once that is longer
/// than its `alertNotSyncedAfter` (the `NotSyncedTooLong` condition).
pub(super) fn not_synced_too_long(status: &ApplicationStatus) -> Option<String> {
    if !holds(&status.conditions, NOT_SYNCED_TOO_LONG_CONDITION) {
        return None;
    }
    let since = status.sync.not_synced_since.as_deref()?;
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    Some(format!(
        "⚠ {}",
        tether_core::alert::span(tether_core::alert::elapsed(since, &now))
    ))
}

/// The longest MESSAGE shown; `tether status NAME -o yaml` has it all.
const MESSAGE_WIDTH: usize = 100;

/// Why an app is not Converged, in one line: the failed step of the
/// `Reconciled` condition, else another problem condition that holds (a
/// self-heal back-off, a blocked prune), else the health message when not
/// Healthy; empty when all is well.
fn message(status: &ApplicationStatus) -> String {
    let failed = condition_with(&status.conditions, RECONCILED_CONDITION, False);
    let problem = status
        .conditions
        .iter()
        .find(|c| PROBLEM_CONDITIONS.contains(&c.type_.as_str()) && c.status == True);
    let orphans = kept_orphans(status);
    let text = match (failed, problem) {
        (Some(c), _) | (None, Some(c)) => format!("{}: {}", c.reason, c.message),
        (None, None) if status.health.status != HealthStatus::Healthy => {
            status.health.message.clone()
        }
        (None, None) if orphans > 0 => format!(
            "{orphans} object(s) no longer in Git kept in the cluster (tether drift shows why)"
        ),
        (None, None) => String::new(),
    };
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(MESSAGE_WIDTH) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

/// Objects no longer in Git that prune left in the cluster (prune off, or
/// kept for a reason): Synced with DRIFT 0 would hide them.
fn kept_orphans(status: &ApplicationStatus) -> usize {
    status
        .orphans
        .iter()
        .filter(|o| o.prune != PruneFate::Deleted)
        .count()
}

/// Per app, the writers besides Tether still owning fields of its objects
/// ("the controller is the only writer"), one line each; nothing when none.
fn other_writers(apps: &[Application]) -> String {
    let mut out = String::new();
    for app in apps {
        let Some(status) = &app.status else { continue };
        if status.other_writers.is_empty() {
            continue;
        }
        out.push_str(&format!("\n{}: other writers\n", app.name_any()));
        for entry in &status.other_writers {
            out.push_str(&format!("  {}\n", writer_line(entry)));
        }
    }
    out
}

/// One writer besides Tether: the object, the manager (operation,
/// subresource), how many fields and which, and when.
pub(super) fn writer_line(entry: &OtherWriterEntry) -> String {
    let writer = &entry.writer.writer;
    let via = writer
        .subresource
        .as_deref()
        .map(|s| format!(" /{s}"))
        .unwrap_or_default();
    format!(
        "{}  {} ({:?}{via})  {} field(s): {}  {}",
        entry.object,
        writer.manager,
        writer.operation,
        entry.writer.fields,
        entry.writer.paths.join(", "),
        writer.time.as_deref().unwrap_or("-"),
    )
}

fn age(app: &Application) -> String {
    let Some(created) = app.creation_timestamp() else {
        return "-".into();
    };
    let seconds = (k8s_openapi::jiff::Timestamp::now() - created.0)
        .total(k8s_openapi::jiff::Unit::Second)
        .unwrap_or(0.0) as i64;
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// A revision for a table cell: its first 12 characters; for several
/// sources (`1.0.0 + <commit>`) each commit's first 7.
fn short_revision(revision: &str) -> String {
    let parts: Vec<&str> = revision.split(" + ").collect();
    if let [single] = parts[..] {
        return single.chars().take(12).collect();
    }
    let commit = |part: &str| part.len() == 40 && part.bytes().all(|b| b.is_ascii_hexdigit());
    parts
        .iter()
        .map(|part| if commit(part) { &part[..7] } else { part })
        .collect::<Vec<_>>()
        .join("+")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_says_why_an_app_is_not_converged() {
        let status = |value: serde_json::Value| -> ApplicationStatus {
            serde_json::from_value(value).unwrap()
        };
        let failed = status(serde_json::json!({
            "health": {"status": "Unknown"},
            "conditions": [{"type": "Reconciled", "status": "False", "reason": "RenderFailed",
                            "message": "app/broken.yaml:2: mapping values are not allowed\nmore"}]}));
        assert_eq!(
            message(&failed),
            "RenderFailed: app/broken.yaml:2: mapping values are not allowed"
        );
        let degraded = status(serde_json::json!({
            "health": {"status": "Degraded", "message": "Deployment web: 0/2 available"},
            "conditions": [{"type": "Reconciled", "status": "True", "reason": "Succeeded"}]}));
        assert_eq!(message(&degraded), "Deployment web: 0/2 available");
        let fine = status(serde_json::json!({"health": {"status": "Healthy", "message": "ok"}}));
        assert_eq!(message(&fine), "");
        let orphaned = status(serde_json::json!({"health": {"status": "Healthy"},
            "orphans": [{"object": "Service shop/old", "prune": "kept: prune is off for this app"},
                        {"object": "ConfigMap shop/gone", "prune": "Deleted"}]}));
        assert_eq!(kept_orphans(&orphaned), 1);
        assert_eq!(
            message(&orphaned),
            "1 object(s) no longer in Git kept in the cluster (tether drift shows why)"
        );
        let long = status(serde_json::json!({"conditions": [{"type": "PruneBlocked",
            "status": "True", "reason": "CircuitBreaker", "message": "x".repeat(300)}]}));
        assert_eq!(message(&long).chars().count(), MESSAGE_WIDTH + 1);
    }

    #[test]
    fn other_writers_are_listed_under_their_app_one_line_each() {
        let app: Application = serde_json::from_value(serde_json::json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "tether-system"},
            "spec": {"source": {"repoURL": "file:///srv/git/shop.git"},
                     "destination": {"namespace": "shop"}},
            "status": {"otherWriters": [{"object": "Deployment shop/web", "manager": "kubectl",
                "operation": "Update", "subresource": "scale", "time": "2026-11-30T10:05:00Z",
                "fields": 1, "paths": ["spec.replicas"]}]}
        }))
        .unwrap();
        assert_eq!(
            other_writers(&[app]),
            "\nshop: other writers\n  Deployment shop/web  kubectl (Update /scale)  1 field(s): spec.replicas  2026-11-30T10:05:00Z\n"
        );
    }

    #[test]
    fn a_revision_of_several_sources_is_shortened_per_commit() {
        let commit = "3f2a1b2c3d4e5f60718293a4b5c6d7e8f9012345";
        assert_eq!(short_revision(commit), "3f2a1b2c3d4e");
        assert_eq!(
            short_revision(&format!("1.0.0 + {commit}")),
            "1.0.0+3f2a1b2"
        );
        assert_eq!(short_revision("1.2.4"), "1.2.4");
    }
}
