//! `tether health`: assess the health of objects in manifest files, offline.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;
use tether_core::health::RuleSet;

use super::out::outln;

/// Print each object's health and message, judged in this order: a rules
/// file given with `--rules`, the shipped CEL rules, the built-in checks,
/// and for any other kind the generic inference from its status.
///
/// Example: `kubectl get deploy,pods -o yaml | tether health -f - --explain`
#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    /// A YAML/JSON file, a directory of them, or `-` for standard input.
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,
    /// A health rules file whose rules take precedence over shipped ones.
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Leave out the rules shipped with Tether: built-in checks and the
    /// generic inference only (what a brand-new CRD gets), plus `--rules`.
    #[arg(long)]
    pub no_shipped_rules: bool,
    /// Print under each object the path of the decision: the rule or check
    /// that judged it, or every status signal the generic inference weighed.
    #[arg(long)]
    pub explain: bool,
}

pub fn run(args: HealthArgs) -> anyhow::Result<ExitCode> {
    let shipped = if args.no_shipped_rules {
        RuleSet::default()
    } else {
        RuleSet::shipped()
    };
    let rules = match &args.rules {
        None => shipped,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            RuleSet::from_yaml(&path.display().to_string(), &text)?.over(shipped)
        }
    };
    for (origin, text) in read_inputs(&args.file)? {
        for object in objects(&origin, &text)? {
            let (health, path) = rules.explain(&object);
            match health {
                Some(health) => outln!("{:<12} {}", health.status, health.message),
                None => outln!(
                    "{:<12} {} (no health check applies)",
                    "-",
                    describe(&object)
                ),
            }
            if args.explain {
                for step in path {
                    outln!("{:<12} {step}", "");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The texts to read, with a name for errors: stdin, a file, or every
/// `.yaml`, `.yml` and `.json` file under a directory, in path order.
fn read_inputs(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading standard input")?;
        return Ok(vec![("<stdin>".to_string(), text)]);
    }
    let mut files = Vec::new();
    collect(path, &mut files)?;
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading {}", file.display()))?;
            Ok((file.display().to_string(), text))
        })
        .collect()
}

fn collect(path: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if !path.is_dir() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    for entry in std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))? {
        let entry = entry?.path();
        let manifest = entry
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml" || ext == "json");
        if entry.is_dir() {
            collect(&entry, files)?;
        } else if manifest {
            files.push(entry);
        }
    }
    Ok(())
}

/// The objects in a YAML stream; `*List` documents are flattened.
fn objects(origin: &str, text: &str) -> anyhow::Result<Vec<Value>> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(text).with_context(|| format!("{origin}: not YAML"))?;
    let mut objects = Vec::new();
    for document in documents.into_iter().filter(|document| !document.is_null()) {
        let is_list = document["kind"]
            .as_str()
            .is_some_and(|kind| kind.ends_with("List"));
        match document.get("items").and_then(Value::as_array) {
            Some(items) if is_list => objects.extend(items.iter().cloned()),
            _ => objects.push(document),
        }
    }
    Ok(objects)
}

fn describe(object: &Value) -> String {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("?")
    };
    format!("{} {}", text("/kind"), text("/metadata/name"))
}
