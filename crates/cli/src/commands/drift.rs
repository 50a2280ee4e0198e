//! `tether drift`: which objects differ from Git, which fields, who changed
//! them, and what Tether did about it.

use std::process::ExitCode;

use kube::ResourceExt;
use serde_json::Value;
use tether_controller::api::Application;
use tether_core::drift::{DriftOutcome, DriftedField};

use super::columns::aligned;
use super::out::{out, outln, print_as};
use super::selection::Selection;

/// Show drift: per object and field the desired and live values (Secret
/// values masked), the writer (field manager, operation, time), the kind
/// (Manual, Accidental, Emergency) and the response (Healed, Reported,
/// BackedOff); then orphans (objects no longer in Git) and their prune fate.
/// The table shows drift as it stands; `--resolved` adds the drift resolved
/// recently (healed, or gone because Git or someone else changed the
/// object); `-o json|yaml` always has both, resolved rows with `resolvedAt`.
///
/// Exit code: 0 no unresolved drift or orphan, 1 some, 2 error.
/// Example: `tether drift shop`, `tether drift -o json` or `tether drift -o yaml`
#[derive(Debug, clap::Args)]
pub struct DriftArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// Output format: table, yaml or json.
    #[arg(long, short = 'o', default_value = "table", value_parser = ["table", "json", "yaml"])]
    pub output: String,
    /// Also show drift resolved recently, with when it was resolved.
    #[arg(long)]
    pub resolved: bool,
}

pub async fn run(args: DriftArgs) -> anyhow::Result<ExitCode> {
    let apps = args.selection.applications().await?;
    let rows = rows(&apps);
    match args.output.as_str() {
        "json" | "yaml" => print_as(&rows, &args.output)?,
        _ => {
            let shown: Vec<DriftRow> = rows
                .iter()
                .filter(|row| args.resolved || row.resolved_at.is_none())
                .cloned()
                .collect();
            out!("{}", table(&shown));
            let hidden = rows.len() - shown.len();
            if hidden > 0 {
                outln!("({hidden} row(s) of drift resolved recently: tether drift --resolved)");
            }
        }
    }
    let unresolved = rows.iter().any(|row| row.resolved_at.is_none());
    Ok(if unresolved {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// One row of `tether drift`: an app's object, one drifted field (or none
/// for a missing object or an orphan), and what became of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftRow {
    pub app: String,
    pub object: String,
    /// Manual, Accidental, Emergency, or Orphan.
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<DriftedField>,
    /// Healed, Reported, BackedOff, or an orphan's prune fate.
    pub response: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detected_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_at: Option<String>,
}

/// The rows `tether drift` shows for `apps`: current drift, then recently
/// resolved drift, then orphans.
pub fn rows(apps: &[Application]) -> Vec<DriftRow> {
    let mut rows = Vec::new();
    for app in apps {
        let Some(status) = &app.status else { continue };
        for entry in status.drift.iter().chain(&status.last_drift) {
            let record = &entry.record;
            let row = |field| DriftRow {
                app: app.name_any(),
                object: record.object.to_string(),
                kind: record.kind.to_string(),
                field,
                response: entry.response.to_string(),
                detected_at: Some(record.detected_at.clone()),
                resolved_at: entry.resolved_at.clone(),
            };
            if record.fields.is_empty() {
                rows.push(row(None));
            }
            rows.extend(record.fields.iter().cloned().map(Some).map(row));
        }
        for orphan in &status.orphans {
            rows.push(DriftRow {
                app: app.name_any(),
                object: orphan.object.clone(),
                kind: "Orphan".into(),
                field: None,
                response: orphan.prune.to_string(),
                detected_at: None,
                resolved_at: None,
            });
        }
    }
    rows
}

/// `rows` as an aligned table: APP OBJECT KIND FIELD DESIRED LIVE WRITER
/// DETECTED RESPONSE.
pub fn table(rows: &[DriftRow]) -> String {
    let header = [
        "APP", "OBJECT", "KIND", "FIELD", "DESIRED", "LIVE", "WRITER", "DETECTED", "RESPONSE",
    ];
    let dash = || "-".to_string();
    let value = |value: &Option<Value>| value.as_ref().map(Value::to_string).unwrap_or_else(dash);
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for row in rows {
        let field = row.field.as_ref();
        let writer = field.and_then(|f| f.writer.as_ref()).map(|w| {
            let via = w
                .subresource
                .as_deref()
                .map(|s| format!("/{s}"))
                .unwrap_or_default();
            format!(
                "{}{via} {:?} {}",
                w.manager,
                w.operation,
                w.time.as_deref().unwrap_or("")
            )
        });
        let response = match &row.resolved_at {
            Some(at) if row.response == DriftOutcome::Healed.as_str() => {
                format!("{} at {at}", row.response)
            }
            // Not healed, yet gone: Git or someone else changed the object.
            Some(at) => format!("gone at {at} (was {})", row.response),
            None => row.response.clone(),
        };
        lines.push(vec![
            row.app.clone(),
            row.object.clone(),
            row.kind.clone(),
            field.map(|f| f.path.clone()).unwrap_or_else(dash),
            field.map(|f| value(&f.desired)).unwrap_or_else(dash),
            field.map(|f| value(&f.live)).unwrap_or_else(dash),
            writer
                .map(|w| w.trim_end().to_string())
                .unwrap_or_else(dash),
            row.detected_at.clone().unwrap_or_else(dash),
            response,
        ]);
    }
    aligned(&lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An app with a scaled Deployment (healed), a missing ConfigMap
    /// (reported, open) and an orphaned Service.
    fn shop() -> Application {
        serde_json::from_value(json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "tether-system"},
            "spec": {"source": {"repoURL": "file:///repo", "path": "app"},
                     "destination": {"namespace": "shop"}},
            "status": {
                "drift": [{"object": {"group": "", "kind": "ConfigMap", "namespace": "shop", "name": "settings"},
                           "kind": "Accidental", "fields": [], "detectedAt": "2026-01-01T00:00:02Z",
                           "response": "Reported"}],
                "lastDrift": [{"object": {"group": "apps", "kind": "Deployment", "namespace": "shop", "name": "web"},
                               "kind": "Manual",
                               "fields": [{"path": "spec.replicas", "pointer": "/spec/replicas", "desired": 2, "live": 5,
                                           "writer": {"manager": "kubectl", "operation": "Update", "subresource": "scale",
                                                      "time": "2026-01-01T00:00:00Z"}}],
                               "detectedAt": "2026-01-01T00:00:01Z",
                               "response": "Healed", "resolvedAt": "2026-01-01T00:00:03Z"}],
                "orphans": [{"object": "Service shop/old", "prune": "kept: prune is off for this app"}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn the_table_shows_open_drift_then_resolved_drift_then_orphans() {
        let expected = "\
APP   OBJECT                   KIND        FIELD          DESIRED  LIVE  WRITER                                     DETECTED              RESPONSE
shop  ConfigMap shop/settings  Accidental  -              -        -     -                                          2026-01-01T00:00:02Z  Reported
shop  Deployment shop/web      Manual      spec.replicas  2        5     kubectl/scale Update 2026-01-01T00:00:00Z  2026-01-01T00:00:01Z  Healed at 2026-01-01T00:00:03Z
shop  Service shop/old         Orphan      -              -        -     -                                          -                     kept: prune is off for this app
";
        assert_eq!(table(&rows(&[shop()])), expected);
    }

    #[test]
    fn drift_that_went_away_unhealed_reads_as_gone_not_as_still_reported() {
        let mut row = rows(&[shop()])[1].clone();
        row.response = DriftOutcome::Reported.to_string();
        let table = table(&[row]);
        assert!(
            table.contains("gone at 2026-01-01T00:00:03Z (was Reported)"),
            "{table}"
        );
    }

    #[test]
    fn rows_serialize_as_camel_case_without_empty_fields() {
        let rows = serde_json::to_value(rows(&[shop()])).unwrap();
        assert_eq!(
            rows[2],
            json!({"app": "shop", "object": "Service shop/old", "kind": "Orphan",
                   "response": "kept: prune is off for this app"})
        );
        assert_eq!(rows[1]["resolvedAt"], "2026-01-01T00:00:03Z");
        assert_eq!(rows[1]["field"]["writer"]["manager"], "kubectl");
    }
}
