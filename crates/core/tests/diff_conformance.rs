//! Conformance of the diff against Argo CD gitops-engine's `pkg/diff` cases
//! (`shared/conformance/diff/gitops-engine/`, format in its README).
//!
//! Each case says whether gitops-engine finds the live object modified.
//! Server-side cases carry the dry-run result (`predicted_live`) and are
//! judged with `diff`; the others have only the manifest and live object and
//! are judged with `diff_manifest`. Server-side cases are also run through
//! `diff_manifest`, to show what the fallback would say. The table is
//! printed; docs/diff-conformance.md explains every disagreement.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use tether_core::diff::{Diff, IgnoreRule, JsonPointer, SecretMask, diff, diff_manifest};
use tether_core::tracking::FIELD_MANAGER;

/// Cases where we must agree at least this often; raise it when we improve.
const MIN_AGREEMENT: usize = 24;

#[derive(Deserialize)]
struct Expectations {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    mode: String,
    config: String,
    live: String,
    predicted_live: Option<String>,
    #[serde(default)]
    options: Options,
    expected_modified: bool,
}

#[derive(Deserialize, Default)]
struct Options {
    manager: Option<String>,
    #[serde(default)]
    normalizer_remove_fields: Vec<Vec<String>>,
}

fn corpus() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/diff/gitops-engine");
    assert!(
        dir.join("expected.yaml").is_file(),
        "diff conformance corpus not found at {} (expected shared/ beside the repository)",
        dir.display()
    );
    dir
}

fn load(dir: &Path, file: &str) -> Value {
    let path = dir.join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if file.ends_with(".json") {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    } else {
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

/// The case's ignoreDifferences-style normalizer as a rule for its object.
fn ignore_rules(case: &Case, config: &Value) -> Vec<IgnoreRule> {
    if case.options.normalizer_remove_fields.is_empty() {
        return Vec::new();
    }
    let id = tether_core::ObjectRef::from_object(config).expect("config has an identity");
    let json_pointers = case
        .options
        .normalizer_remove_fields
        .iter()
        .map(|fields| {
            let pointer: String = fields.iter().map(|f| format!("/{f}")).collect();
            JsonPointer::try_from(pointer).expect("a valid pointer")
        })
        .collect();
    vec![IgnoreRule {
        group: id.group,
        kind: id.kind,
        name: None,
        namespace: None,
        json_pointers,
        managed_fields_managers: Vec::new(),
    }]
}

fn summary(diff: &Diff) -> String {
    let paths: Vec<String> = diff
        .fields
        .iter()
        .take(3)
        .map(|f| f.path.to_string())
        .collect();
    let more = diff.fields.len().saturating_sub(3);
    match (paths.is_empty(), more) {
        (true, _) => "-".into(),
        (false, 0) => paths.join(", "),
        (false, more) => format!("{} (+{more})", paths.join(", ")),
    }
}

#[test]
fn diff_agrees_with_gitops_engine_where_its_semantics_apply() {
    let dir = corpus();
    let expectations: Expectations = serde_saphyr::from_str(
        &std::fs::read_to_string(dir.join("expected.yaml")).expect("expected.yaml is readable"),
    )
    .expect("expected.yaml parses");
    let mut agreed = 0;
    let mut rows = Vec::new();
    for case in &expectations.cases {
        let config = load(&dir, &case.config);
        let live = load(&dir, &case.live);
        let ignore = ignore_rules(case, &config);
        let manager = case.options.manager.as_deref().unwrap_or(FIELD_MANAGER);
        let by_manifest = diff_manifest(&config, &live, &ignore, manager, SecretMask::Hidden)
            .expect("manifest diff");
        let by_dry_run = case.predicted_live.as_ref().map(|file| {
            diff(&load(&dir, file), &live, &ignore, SecretMask::Hidden).expect("dry-run diff")
        });
        let modified = !by_dry_run.as_ref().unwrap_or(&by_manifest).is_empty();
        let agrees = modified == case.expected_modified;
        agreed += usize::from(agrees);
        rows.push(format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            case.name,
            case.mode,
            case.expected_modified,
            by_dry_run
                .as_ref()
                .map_or("n/a".into(), |d| (!d.is_empty()).to_string()),
            !by_manifest.is_empty(),
            if agrees { "yes" } else { "**no**" },
            by_dry_run.as_ref().map_or("n/a".into(), summary),
            summary(&by_manifest),
        ));
    }
    println!(
        "| case | mode | gitops-engine modified | ours (dry-run) | ours (manifest) | agree | differing fields (ours) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{row}");
    }
    println!("agreement: {agreed}/{}", expectations.cases.len());
    assert!(
        agreed >= MIN_AGREEMENT,
        "diff conformance fell to {agreed}/{} (minimum {MIN_AGREEMENT}); see the table above",
        expectations.cases.len()
    );
}
