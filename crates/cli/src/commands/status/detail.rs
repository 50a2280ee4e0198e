//! `tether status NAME`: one Application in full — its source, the
//! revision it resolved and synced, Synced × Healthy and the state they
//! name, every condition with its reason and message, the last operation,
//! drift, orphans and other writers.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use tether_controller::report::status::NOT_SYNCED_TOO_LONG_CONDITION;

use kube::ResourceExt;
use tether_controller::api::application::{OperationState, SourceStatus, condition_with};
use tether_controller::api::{Application, ApplicationStatus};
use tether_core::ConditionStatus::True;
use tether_core::SyncStatus;
use tether_source::{Renderer, Source, VerifyMode};

/// The detail view of `app`, as text.
pub fn detail(app: &Application) -> String {
    let mut out = Text::default();
    let namespace = app.namespace().unwrap_or_default();
    out.field("Application", &format!("{namespace}/{}", app.name_any()));
    source(&mut out, app);
    let status = app.status.clone().unwrap_or_default();
    revisions(&mut out, &status);
    state(&mut out, app);
    out.blank();
    conditions(&mut out, &status);
    out.blank();
    operation(&mut out, status.operation_state.as_ref());
    out.blank();
    drift(&mut out, &status);
    orphans(&mut out, &status);
    other_writers(&mut out, &status);
    out.0
}

/// Lines of `Label:  value`, the values aligned.
#[derive(Default)]
struct Text(String);

/// The width of the label column.
const LABEL: usize = 14;

impl Text {
    fn field(&mut self, label: &str, value: &str) {
        self.indented(0, label, value);
    }

    fn indented(&mut self, indent: usize, label: &str, value: &str) {
        let label = format!("{}{label}:", " ".repeat(indent));
        let width = LABEL.max(label.chars().count() + 1);
        let _ = writeln!(self.0, "{label:<width$}{value}");
    }

    fn line(&mut self, text: &str) {
        let _ = writeln!(self.0, "{text}");
    }

    fn blank(&mut self) {
        self.0.push('\n');
    }
}

fn source(out: &mut Text, app: &Application) {
    let resolved = app
        .status
        .as_ref()
        .map(|status| status.sync.sources.as_slice())
        .unwrap_or_default();
    for (index, source) in app.spec.sources().into_iter().enumerate() {
        // What it resolved to at the last comparison.
        let found = resolved
            .get(index)
            .filter(|found| found.repo_url == source.repo_url);
        one_source(out, source, found);
    }
    let destination = &app.spec.destination;
    let mut namespaces = destination.namespace.clone();
    if !destination.allow_namespaces.is_empty() {
        namespaces.push_str(&format!(
            " (also: {})",
            destination.allow_namespaces.join(", ")
        ));
    }
    if let Some(cluster) = &destination.cluster {
        namespaces.push_str(&format!(" on cluster {cluster}"));
    }
    out.field("Destination", &namespaces);
    let status = app.status.as_ref();
    let project = status
        .and_then(|s| s.project.clone())
        .or_else(|| app.spec.project.clone())
        .unwrap_or_else(|| "none (no Project applies)".into());
    out.field("Project", &project);
    let applies_as = match (
        status.and_then(|s| s.applies_as.as_ref()),
        &app.spec.service_account_name,
    ) {
        (Some(user), _) => user.clone(),
        (None, Some(account)) => {
            format!("ServiceAccount {account} (not confirmed by the controller yet)")
        }
        (None, None) => "the controller's own identity".into(),
    };
    out.field("Applies as", &applies_as);
    let policy = &app.spec.sync_policy;
    let mut words = vec![
        if policy.automated {
            "automated"
        } else {
            "manual"
        },
        if policy.heals() {
            "self-heal"
        } else {
            "drift reported, not reverted"
        },
        if policy.prune { "prune" } else { "no prune" },
    ];
    if policy.create_namespace {
        words.push("create namespace");
    }
    out.field("Sync policy", &words.join(", "));
}

/// One source of the app: where it reads, how it renders, what it
/// resolved to (`found`, at the last comparison) and how it is checked.
fn one_source(out: &mut Text, source: &Source, found: Option<&SourceStatus>) {
    let title = match source.name.as_str() {
        "" => "Source".to_string(),
        name => format!("Source {name}"),
    };
    out.field(&title, &source.repo_url);
    if source.is_chart() {
        out.indented(2, "Chart", &source.chart);
        let wanted = match source.version.as_str() {
            "" => "the highest stable version",
            version => version,
        };
        out.indented(2, "Version", wanted);
        out.indented(2, "Renderer", &renderer(&source.chart_renderer()));
    } else {
        let path = match source.path.trim_matches('/') {
            "" if !source.renders() => "(none: lends its files as $NAME/…)",
            "" => "(the repository root)",
            path => path,
        };
        out.indented(2, "Path", path);
        if source.renders() {
            out.indented(2, "Renderer", &renderer(&source.renderer));
        }
        let target = match (
            source.is_artifact(),
            source.revision.as_str(),
            source.version.as_str(),
        ) {
            (true, _, "") => "latest (the tag)",
            (true, _, version) => version,
            (false, "", _) => "HEAD (the remote's default branch)",
            (false, revision, _) => revision,
        };
        out.indented(2, "Target", target);
    }
    if let Some(found) = found {
        let digest = match found.digest.as_str() {
            "" => String::new(),
            digest => format!(" ({digest})"),
        };
        out.indented(2, "Resolved", &format!("{}{digest}", found.revision));
    }
    if let Some(interval) = &source.interval {
        out.indented(2, "Interval", interval);
    }
    if let Some(secret) = &source.secret_ref {
        out.indented(2, "Credentials", &format!("Secret {}", secret.name));
    }
    if source.verify.mode != VerifyMode::None {
        out.indented(2, "Verify", source.verify.mode.as_str());
    }
}

/// The renderer's name and the options it was given.
fn renderer(renderer: &Renderer) -> String {
    let mut parts = Vec::new();
    match renderer {
        Renderer::Directory(options) => {
            if !options.include.is_empty() {
                parts.push(format!("include {}", options.include.join(", ")));
            }
            if !options.exclude.is_empty() {
                parts.push(format!("exclude {}", options.exclude.join(", ")));
            }
        }
        Renderer::Kustomize(_) => {}
        Renderer::Helm(options) => {
            if !options.release_name.is_empty() {
                parts.push(format!("release {}", options.release_name));
            }
            if !options.value_files.is_empty() {
                parts.push(format!("values {}", options.value_files.join(", ")));
            }
            if !options.values.is_empty() {
                parts.push("inline values".to_string());
            }
        }
        Renderer::Jsonnet(options) => {
            if !options.main.is_empty() {
                parts.push(format!("main {}", options.main));
            }
            if !options.tlas.is_empty() {
                parts.push(format!("TLAs {}", names(&options.tlas)));
            }
            if !options.ext_vars.is_empty() {
                parts.push(format!("ext vars {}", names(&options.ext_vars)));
            }
        }
    }
    match parts.is_empty() {
        true => renderer.name().to_string(),
        false => format!("{} ({})", renderer.name(), parts.join("; ")),
    }
}

fn names(map: &BTreeMap<String, String>) -> String {
    map.keys().cloned().collect::<Vec<_>>().join(", ")
}

fn revisions(out: &mut Text, status: &ApplicationStatus) {
    let dash = "-".to_string();
    out.field(
        "Resolved",
        status.sync.compared_to.as_ref().unwrap_or(&dash),
    );
    out.field("Synced to", status.sync.revision.as_ref().unwrap_or(&dash));
}

fn state(out: &mut Text, app: &Application) {
    let Some(status) = &app.status else {
        out.field("Status", "not reported yet (is `tether run` running?)");
        return;
    };
    let state = status.state.map_or("-", |s| s.as_str());
    out.field(
        "Status",
        &format!(
            "{} × {} → {state}",
            status.sync.status.as_str(),
            status.health.status.as_str()
        ),
    );
    if !status.health.message.is_empty() {
        out.indented(2, "Health", &status.health.message);
    }
    let count = status.resource_count.unwrap_or(status.resources.len());
    let out_of_sync = status
        .resources
        .iter()
        .filter(|r| r.sync != SyncStatus::Synced)
        .count();
    out.indented(2, "Objects", &format!("{count} ({out_of_sync} not synced)"));
    if let Some(since) = &status.sync.not_synced_since {
        let mark = super::not_synced_too_long(status).unwrap_or_default();
        out.indented(2, "Not synced", &format!("since {since} {mark}"));
        if let Some(alert) = condition_with(&status.conditions, NOT_SYNCED_TOO_LONG_CONDITION, True)
        {
            out.indented(4, "Why", &format!("{}: {}", alert.reason, alert.message));
        }
    }
}

fn conditions(out: &mut Text, status: &ApplicationStatus) {
    if status.conditions.is_empty() {
        out.field("Conditions", "none");
        return;
    }
    out.line("Conditions:");
    for condition in &status.conditions {
        let since = condition
            .last_transition_time
            .as_deref()
            .map(|t| format!("  since {t}"))
            .unwrap_or_default();
        out.line(&format!(
            "  {} {} ({}){since}",
            condition.type_, condition.status, condition.reason
        ));
        for line in condition.message.lines() {
            out.line(&format!("      {line}"));
        }
    }
}

fn operation(out: &mut Text, operation: Option<&OperationState>) {
    let Some(operation) = operation else {
        out.field("Last operation", "none yet");
        return;
    };
    out.line("Last operation:");
    out.indented(2, "Phase", operation.phase.as_str());
    out.indented(2, "Revision", &operation.revision);
    out.indented(2, "Started", &operation.started_at);
    out.indented(
        2,
        "Finished",
        operation.finished_at.as_deref().unwrap_or("-"),
    );
    let mut lines = operation.message.lines();
    out.indented(2, "Message", lines.next().unwrap_or("-"));
    for line in lines {
        out.line(&format!("{:LABEL$}{line}", ""));
    }
    out.indented(2, "Changes", &changes(operation));
}

/// `3 objects: 1 created, 1 configured, 1 unchanged`.
fn changes(operation: &OperationState) -> String {
    let mut by_action: BTreeMap<&str, usize> = BTreeMap::new();
    for change in &operation.changes {
        *by_action.entry(change.action.as_str()).or_default() += 1;
    }
    let total = operation.changes.len() + operation.changes_omitted;
    let changed = operation
        .changes
        .iter()
        .filter(|c| c.action != tether_core::Action::Unchanged)
        .count();
    let mut text = format!("{changed} changed of {total} objects");
    if !by_action.is_empty() {
        let counts: Vec<String> = by_action
            .iter()
            .map(|(action, n)| format!("{n} {action}"))
            .collect();
        text.push_str(&format!(" ({})", counts.join(", ")));
    }
    if operation.changes_omitted > 0 {
        text.push_str(&format!("; {} more not listed", operation.changes_omitted));
    }
    text
}

fn drift(out: &mut Text, status: &ApplicationStatus) {
    if status.drift.is_empty() {
        out.field("Drift", "none");
    } else {
        let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
        for entry in &status.drift {
            *kinds.entry(entry.record.kind.to_string()).or_default() += 1;
        }
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        out.field(
            "Drift",
            &format!("{} object(s): {}", status.drift.len(), kinds.join(", ")),
        );
        for entry in &status.drift {
            let record = &entry.record;
            let fields: Vec<&str> = record.fields.iter().map(|f| f.path.as_str()).collect();
            let fields = match fields.is_empty() {
                true => "missing".to_string(),
                false => fields.join(", "),
            };
            out.line(&format!(
                "  {}  {}  {}  {fields}",
                record.object, record.kind, entry.response
            ));
        }
    }
    if !status.last_drift.is_empty() {
        out.indented(
            2,
            "Resolved",
            &format!(
                "{} recently (`tether drift --resolved` lists them)",
                status.last_drift.len()
            ),
        );
    }
}

fn orphans(out: &mut Text, status: &ApplicationStatus) {
    if status.orphans.is_empty() {
        out.field("Orphans", "none");
        return;
    }
    out.field(
        "Orphans",
        &format!(
            "{} (in the cluster, no longer in Git)",
            status.orphans.len()
        ),
    );
    for orphan in &status.orphans {
        out.line(&format!("  {}  {}", orphan.object, orphan.prune));
    }
}

fn other_writers(out: &mut Text, status: &ApplicationStatus) {
    if status.other_writers.is_empty() {
        out.field("Other writers", "none");
        return;
    }
    out.field("Other writers", &status.other_writers.len().to_string());
    for entry in &status.other_writers {
        out.line(&format!("  {}", super::writer_line(entry)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn app(status: serde_json::Value) -> Application {
        serde_json::from_value(json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "tether-system"},
            "spec": {"source": {"repoURL": "file:///srv/git/shop.git", "path": "apps/shop",
                                "revision": "main", "interval": "10s",
                                "renderer": {"helm": {"valueFiles": ["prod.yaml"]}}},
                     "destination": {"namespace": "shop"},
                     "syncPolicy": {"prune": true, "createNamespace": true}},
            "status": status
        }))
        .unwrap()
    }

    #[test]
    fn the_detail_view_shows_source_state_conditions_operation_drift_and_orphans() {
        let shown = detail(&app(json!({
            "sync": {"status": "OutOfSync", "revision": "aaaa", "comparedTo": "bbbb (tree cccc)"},
            "health": {"status": "Degraded", "message": "Deployment shop/web: 0/2 available"},
            "state": "Broken",
            "resourceCount": 2,
            "resources": [{"kind": "Deployment", "namespace": "shop", "name": "web",
                           "sync": "OutOfSync"}],
            "conditions": [
                {"type": "Reconciled", "status": "False", "reason": "ApplyFailed",
                 "message": "Deployment shop/web: forbidden\nsecond line",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "operationState": {"phase": "Failed", "message": "apply failed", "revision": "bbbb",
                "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z",
                "changes": [{"object": "ConfigMap shop/a", "action": "created"},
                            {"object": "ConfigMap shop/b", "action": "unchanged"}],
                "changesOmitted": 1},
            "drift": [{"object": {"group": "apps", "kind": "Deployment", "namespace": "shop",
                                  "name": "web"},
                       "kind": "Manual", "detectedAt": "2026-01-01T00:00:00Z",
                       "fields": [{"path": "spec.replicas", "pointer": "/spec/replicas",
                                   "desired": 2, "live": 5}],
                       "response": "Healed"}],
            "orphans": [{"object": "Service shop/old", "prune": "kept: prune is off for this app"}]
        })));
        for expected in [
            "Application:  tether-system/shop",
            "Source:       file:///srv/git/shop.git",
            "  Path:       apps/shop",
            "  Renderer:   helm (values prod.yaml)",
            "  Target:     main",
            "  Interval:   10s",
            "Destination:  shop",
            "Sync policy:  automated, self-heal, prune, create namespace",
            "Resolved:     bbbb (tree cccc)",
            "Synced to:    aaaa",
            "Status:       OutOfSync × Degraded → Broken",
            "  Health:     Deployment shop/web: 0/2 available",
            "  Objects:    2 (1 not synced)",
            "  Reconciled False (ApplyFailed)  since 2026-01-01T00:00:00Z",
            "      Deployment shop/web: forbidden",
            "      second line",
            "  Phase:      Failed",
            "  Message:    apply failed",
            "  Changes:    1 changed of 3 objects (1 created, 1 unchanged); 1 more not listed",
            "Drift:        1 object(s): 1 Manual",
            "  Deployment shop/web  Manual  Healed  spec.replicas",
            "Orphans:      1 (in the cluster, no longer in Git)",
            "  Service shop/old  kept: prune is off for this app",
            "Other writers: none",
        ] {
            assert!(
                shown.lines().any(|line| line == expected),
                "no {expected:?} in:\n{shown}"
            );
        }
    }

    #[test]
    fn an_app_not_reported_on_yet_says_so() {
        let mut app = app(json!({}));
        app.status = None;
        let shown = detail(&app);
        assert!(shown.contains("Status:       not reported yet"), "{shown}");
        assert!(shown.contains("Last operation: none yet"), "{shown}");
        assert!(shown.contains("Conditions:   none"), "{shown}");
    }
}
