//! Kustomize, checked before it runs: every path a kustomization names
//! (resources, bases, components, patches, generators' files, ...) must
//! stay inside the repository once the repository's symlinks are followed,
//! and bases must be directories of the repository, never remote (`https://`,
//! `git@`, `github.com/...`) or `file://` URLs. Kustomizations reached
//! through resources, bases and components are checked the same way.

use std::collections::{BTreeSet, VecDeque};

use serde_json::Value;

use super::RenderError;
use crate::detect::KUSTOMIZATION_FILES;
use crate::files::{Entry, Files};
use crate::manifest::yaml_message;

/// Fields whose entries are paths to files or kustomization directories.
const BASES: &[&str] = &["resources", "bases", "components"];
/// Fields whose entries are paths to files (or inline YAML, skipped).
const FILES: &[&str] = &[
    "crds",
    "configurations",
    "generators",
    "transformers",
    "validators",
    "patchesStrategicMerge",
];
/// Fields whose entries are objects with a `path`.
const PATH_OBJECTS: &[&str] = &["patches", "patchesJson6902", "replacements"];
/// Generators whose entries name files in `files`, `envs` and `env`.
const GENERATORS: &[&str] = &["configMapGenerator", "secretGenerator"];

/// Checks the kustomization at `path` of `repository` and every
/// kustomization it reaches.
pub fn check(repository: &Files, path: &str) -> Result<(), RenderError> {
    let mut queue = VecDeque::from([path.trim_matches('/').to_string()]);
    let mut seen = BTreeSet::new();
    while let Some(dir) = queue.pop_front() {
        if !seen.insert(dir.clone()) {
            continue;
        }
        let Some((file, text)) = kustomization(repository, &dir) else {
            continue;
        };
        // A file that cannot be checked is not handed to kustomize.
        let value =
            serde_saphyr::from_str_with_options::<Value>(&text, options()).map_err(|error| {
                let at = error
                    .location()
                    .map(|l| format!("{file}:{}", l.line()))
                    .unwrap_or_else(|| file.clone());
                RenderError::Failed {
                    renderer: "kustomize".into(),
                    message: format!("{at}: {}", yaml_message(&error.to_string())),
                }
            })?;
        let checker = Checker {
            repository,
            dir: &dir,
            file: &file,
        };
        queue.extend(checker.check(&value)?);
    }
    Ok(())
}

/// A kustomization is small and rarely uses aliases: it may not expand
/// much in this process.
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        with_snippet: false,
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: 10_000,
        },
    }
}

/// The kustomization file in `dir`, by its repository path, and its text.
fn kustomization(repository: &Files, dir: &str) -> Option<(String, String)> {
    KUSTOMIZATION_FILES.iter().find_map(|name| {
        let file = join(dir, name);
        let resolved = repository.resolve(&file).ok()?;
        match repository.entries.get(&resolved) {
            Some(Entry::File(bytes)) => Some((file, String::from_utf8_lossy(bytes).into_owned())),
            _ => None,
        }
    })
}

struct Checker<'a> {
    repository: &'a Files,
    dir: &'a str,
    file: &'a str,
}

impl Checker<'_> {
    /// Checks one kustomization; returns the directories it builds on.
    fn check(&self, kustomization: &Value) -> Result<Vec<String>, RenderError> {
        let mut bases = Vec::new();
        for field in BASES {
            for (index, entry) in strings(kustomization.get(*field)) {
                let at = format!("{field}[{index}]");
                let resolved = self.local(&at, entry)?;
                if self.repository.is_dir(&resolved) {
                    bases.push(resolved);
                } else if !self.repository.entries.contains_key(&resolved) {
                    return Err(self.refuse(
                        &at,
                        format!(
                            "{entry} is not a file or directory of the repository (remote bases are not fetched)"
                        ),
                    ));
                }
            }
        }
        for field in FILES {
            for (index, entry) in strings(kustomization.get(*field)) {
                if !entry.contains('\n') {
                    self.local(&format!("{field}[{index}]"), entry)?;
                }
            }
        }
        for field in PATH_OBJECTS {
            for (index, item) in items(kustomization.get(*field)) {
                if let Some(path) = item.get("path").and_then(Value::as_str) {
                    self.local(&format!("{field}[{index}].path"), path)?;
                }
            }
        }
        for field in GENERATORS {
            for (index, generator) in items(kustomization.get(*field)) {
                for key in ["files", "envs"] {
                    for (i, entry) in strings(generator.get(key)) {
                        // `key=path` names the key the file's content goes under.
                        let path = entry.split_once('=').map_or(entry, |(_, path)| path);
                        self.local(&format!("{field}[{index}].{key}[{i}]"), path)?;
                    }
                }
                if let Some(env) = generator.get("env").and_then(Value::as_str) {
                    self.local(&format!("{field}[{index}].env"), env)?;
                }
            }
        }
        if let Some(path) = kustomization
            .pointer("/openapi/path")
            .and_then(Value::as_str)
        {
            self.local("openapi.path", path)?;
        }
        if let Some(home) = kustomization
            .pointer("/helmGlobals/chartHome")
            .and_then(Value::as_str)
        {
            self.local("helmGlobals.chartHome", home)?;
        }
        Ok(bases)
    }

    /// The repository path `entry` names, relative to this kustomization;
    /// an error if it is a URL or leaves the repository.
    fn local(&self, at: &str, entry: &str) -> Result<String, RenderError> {
        if entry.starts_with("file://") {
            return Err(self.refuse(
                at,
                format!("{entry} is a file:// URL; name a path in the repository"),
            ));
        }
        if is_remote(entry) {
            return Err(self.refuse(
                at,
                format!("{entry} is a remote base; only paths in the repository are allowed"),
            ));
        }
        self.repository
            .resolve(&join(self.dir, entry))
            .map_err(|_| self.refuse(at, format!("{entry} leaves the repository")))
    }

    fn refuse(&self, at: &str, reason: String) -> RenderError {
        RenderError::PathEscape {
            path: self.file.to_string(),
            reason: format!("{at}: {reason}"),
        }
    }
}

/// What kustomize would fetch rather than read: URLs and `host/org/repo`
/// shorthands.
fn is_remote(entry: &str) -> bool {
    entry.contains("://")
        || entry.starts_with("git@")
        || entry.starts_with("git::")
        || entry.contains("?ref=")
        || entry.contains("?version=")
        || ["github.com/", "gitlab.com/", "bitbucket.org/"]
            .iter()
            .any(|host| entry.starts_with(host))
}

fn join(dir: &str, path: &str) -> String {
    if path.starts_with('/') || dir.is_empty() {
        path.to_string()
    } else {
        format!("{dir}/{path}")
    }
}

fn strings(value: Option<&Value>) -> impl Iterator<Item = (usize, &str)> {
    items(value).filter_map(|(index, item)| item.as_str().map(|text| (index, text)))
}

fn items(value: Option<&Value>) -> impl Iterator<Item = (usize, &Value)> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}
