//! Reading the corpus: one YAML file of cases per topic, grouped by layer
//! (`manifests/`, `kustomize/`, `helm/`, `repository/`, `webhook/`), plus
//! the cases the runner generates because they cannot be stored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One bad input and the error it must get.
pub struct Case {
    /// `layer/file/name`, unique in the corpus.
    pub name: String,
    /// Substrings that must all appear in the one-line error.
    pub expect: Vec<String>,
    pub input: Input,
}

/// What is handed to Tether.
pub enum Input {
    /// A repository snapshot rendered at `path` with `renderer`.
    Render {
        files: BTreeMap<String, Vec<u8>>,
        symlinks: BTreeMap<String, String>,
        renderer: serde_json::Value,
        path: String,
    },
    /// A webhook request.
    Webhook {
        headers: BTreeMap<String, String>,
        body: Vec<u8>,
        secret: String,
        /// Sign `body` with `secret` (or `signing_secret`) into this header
        /// (`X-Hub-Signature-256`, `X-Gitea-Signature`), as a sender would.
        sign: Option<String>,
        signing_secret: Option<String>,
        /// Bytes added to the body after it was signed (a tampered replay).
        appended: Vec<u8>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    /// Defaults shared by the file's cases.
    #[serde(default)]
    defaults: Defaults,
    cases: Vec<RawCase>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Defaults {
    #[serde(default)]
    files: BTreeMap<String, String>,
    renderer: Option<serde_json::Value>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    secret: Option<String>,
    sign: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCase {
    name: String,
    expect: OneOrMore,
    #[serde(default)]
    files: BTreeMap<String, String>,
    #[serde(default)]
    symlinks: BTreeMap<String, String>,
    renderer: Option<serde_json::Value>,
    #[serde(default)]
    path: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    body: Option<String>,
    secret: Option<String>,
    sign: Option<String>,
    signing_secret: Option<String>,
    appended: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMore {
    One(String),
    More(Vec<String>),
}

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/bad-input")
}

/// Every case: the stored ones, in path order, then the generated ones.
pub fn corpus() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut paths = Vec::new();
    for layer in ["manifests", "kustomize", "helm", "repository", "webhook"] {
        let dir = root().join(layer);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                paths.push((layer, path));
            }
        }
    }
    paths.sort();
    for (layer, path) in paths {
        cases.extend(read_cases(layer, &path));
    }
    cases.extend(crate::generated::cases());
    let mut names = std::collections::BTreeSet::new();
    for case in &cases {
        assert!(names.insert(case.name.clone()), "case {} twice", case.name);
    }
    cases
}

fn read_cases(layer: &str, path: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(path).unwrap();
    let file: CaseFile =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let topic = path.file_stem().unwrap().to_string_lossy().into_owned();
    let defaults = file.defaults;
    file.cases
        .into_iter()
        .map(|raw| {
            let expect = match raw.expect {
                OneOrMore::One(one) => vec![one],
                OneOrMore::More(more) => more,
            };
            let input = if layer == "webhook" {
                let mut headers = defaults.headers.clone();
                headers.extend(raw.headers);
                Input::Webhook {
                    headers,
                    body: raw.body.unwrap_or_default().into_bytes(),
                    secret: raw.secret.or(defaults.secret.clone()).unwrap_or_default(),
                    sign: raw.sign.or(defaults.sign.clone()).filter(|s| !s.is_empty()),
                    signing_secret: raw.signing_secret,
                    appended: raw.appended.unwrap_or_default().into_bytes(),
                }
            } else {
                let mut files = defaults.files.clone();
                files.extend(raw.files);
                Input::Render {
                    files: files
                        .into_iter()
                        .map(|(p, t)| (p, t.into_bytes()))
                        .collect(),
                    symlinks: raw.symlinks,
                    renderer: raw
                        .renderer
                        .or(defaults.renderer.clone())
                        .unwrap_or(serde_json::json!({"directory": {}})),
                    path: raw.path,
                }
            };
            Case {
                name: format!("{layer}/{topic}/{}", raw.name),
                expect,
                input,
            }
        })
        .collect()
}
