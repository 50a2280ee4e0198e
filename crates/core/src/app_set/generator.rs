//! Generators: each makes a list of parameter sets from its spec and the
//! [`Facts`] the controller gathered (directories of a commit, registered
//! clusters). `matrix` combines two.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::Params;
use super::glob;

/// The name of the cluster Tether runs in, as the `clusters` generator
/// gives it (`name`); a template's `destination.cluster` equal to it means
/// the local cluster (no `cluster`).
pub const LOCAL_CLUSTER: &str = "in-cluster";
/// The local cluster's `server` parameter.
pub const LOCAL_SERVER: &str = "https://kubernetes.default.svc";
/// The default revision of a Git generator.
pub const DEFAULT_REVISION: &str = "HEAD";

/// One generator of `spec.generators` (one key, as in Argo CD).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Generator {
    /// Fixed parameter sets.
    List(ListGenerator),
    /// A repository's directories (Argo CD's Git directory generator).
    Git(GitGenerator),
    /// The registered clusters.
    Clusters(ClustersGenerator),
    /// Every combination of two generators' parameter sets.
    Matrix(MatrixGenerator),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListGenerator {
    /// Each a map of parameter name to value (strings, numbers, booleans).
    pub elements: Vec<BTreeMap<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitGenerator {
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// Branch, tag or commit (default `HEAD`).
    #[serde(default = "head")]
    pub revision: String,
    /// The Secret (in the set's namespace) with the repository's
    /// credentials, as an Application's `source.secretRef`.
    #[serde(default, rename = "secretRef")]
    pub secret_ref: Option<SecretRef>,
    /// Which directories: globs, each including unless `exclude: true`;
    /// an excluded directory is left out whatever includes it.
    pub directories: Vec<DirectoryPattern>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DirectoryPattern {
    pub path: String,
    #[serde(default)]
    pub exclude: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClustersGenerator {
    /// Only clusters whose Secret carries these labels.
    #[serde(default)]
    pub selector: Selector,
    /// Also the cluster Tether runs in (name [`LOCAL_CLUSTER`]), if the
    /// selector has no labels (it has none to match).
    #[serde(default)]
    pub include_local: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Selector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MatrixGenerator {
    /// Exactly two generators.
    pub generators: Vec<Generator>,
}

fn head() -> String {
    DEFAULT_REVISION.to_string()
}

/// A registered cluster, as the `clusters` generator sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cluster {
    pub name: String,
    pub server: String,
    /// The labels of its Secret.
    pub labels: BTreeMap<String, String>,
}

/// What the generators read, gathered by the controller.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Every directory (`a`, `a/b`, …) of a repository at a revision, keyed
    /// by (repoURL, revision); an error says why it could not be listed.
    pub directories: BTreeMap<(String, String), Result<Vec<String>, String>>,
    /// The registered clusters.
    pub clusters: Vec<Cluster>,
}

/// Why a generator made no parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{generator}: {reason}")]
pub struct GenerateError {
    /// Where: `generators[1].matrix.generators[0].git`.
    pub generator: String,
    pub reason: String,
}

/// One parameter set and the generator that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// `generators[0].list`, …
    pub generator: String,
    pub params: Params,
}

impl Generator {
    /// Reads one entry of `spec.generators`.
    pub fn parse(value: &Value, at: &str) -> Result<Generator, GenerateError> {
        serde_json::from_value(value.clone()).map_err(|error| GenerateError {
            generator: at.to_string(),
            reason: format!("not a generator Tether knows (list, git, clusters, matrix): {error}"),
        })
    }

    /// The kind, as written in the spec.
    pub fn kind(&self) -> &'static str {
        match self {
            Generator::List(_) => "list",
            Generator::Git(_) => "git",
            Generator::Clusters(_) => "clusters",
            Generator::Matrix(_) => "matrix",
        }
    }

    /// The repositories whose directories it reads: (repoURL, revision,
    /// the Secret with its credentials).
    pub fn repositories(&self) -> Vec<(String, String, Option<String>)> {
        match self {
            Generator::Git(git) => vec![(
                git.repo_url.clone(),
                git.revision.clone(),
                git.secret_ref.as_ref().map(|s| s.name.clone()),
            )],
            Generator::Matrix(matrix) => matrix
                .generators
                .iter()
                .flat_map(Generator::repositories)
                .collect(),
            Generator::List(_) | Generator::Clusters(_) => Vec::new(),
        }
    }
}

/// The parameter sets of the generators, in order, each with the
/// generator that made it (`at` is its place in the spec).
pub fn generate(generators: &[Generator], facts: &Facts) -> Result<Vec<Generated>, GenerateError> {
    let mut all = Vec::new();
    for (i, generator) in generators.iter().enumerate() {
        let at = format!("generators[{i}].{}", generator.kind());
        all.extend(
            one(generator, &at, facts)?
                .into_iter()
                .map(|params| Generated {
                    generator: at.clone(),
                    params,
                }),
        );
    }
    Ok(all)
}

fn one(generator: &Generator, at: &str, facts: &Facts) -> Result<Vec<Params>, GenerateError> {
    let fail = |reason: String| GenerateError {
        generator: at.to_string(),
        reason,
    };
    match generator {
        Generator::List(list) => list
            .elements
            .iter()
            .enumerate()
            .map(|(i, element)| {
                element_params(element).map_err(|e| fail(format!("elements[{i}]: {e}")))
            })
            .collect(),
        Generator::Git(git) => {
            let key = (git.repo_url.clone(), git.revision.clone());
            match facts.directories.get(&key) {
                Some(Ok(directories)) => Ok(git_directories(git, directories)),
                Some(Err(error)) => Err(fail(format!(
                    "{} at {}: {error}",
                    git.repo_url, git.revision
                ))),
                None => Err(fail(format!(
                    "{} at {} was not read",
                    git.repo_url, git.revision
                ))),
            }
        }
        Generator::Clusters(spec) => Ok(clusters(spec, &facts.clusters)),
        Generator::Matrix(matrix) => {
            let [first, second] = matrix.generators.as_slice() else {
                return Err(fail(format!(
                    "a matrix combines exactly two generators, not {}",
                    matrix.generators.len()
                )));
            };
            let name = |i: usize, g: &Generator| format!("{at}.generators[{i}].{}", g.kind());
            let left = one(first, &name(0, first), facts)?;
            let right = one(second, &name(1, second), facts)?;
            let mut combined = Vec::with_capacity(left.len() * right.len());
            for a in &left {
                for b in &right {
                    let mut params = a.clone();
                    for (key, value) in b {
                        match params.get(key) {
                            Some(other) if other != value => {
                                return Err(fail(format!(
                                    "both generators set parameter {key} ({other:?} and {value:?})"
                                )));
                            }
                            _ => {
                                params.insert(key.clone(), value.clone());
                            }
                        }
                    }
                    combined.push(params);
                }
            }
            Ok(combined)
        }
    }
}

fn element_params(element: &BTreeMap<String, Value>) -> Result<Params, String> {
    element
        .iter()
        .map(|(key, value)| {
            let text = match value {
                Value::String(text) => text.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                other => {
                    return Err(format!(
                        "parameter {key} is not a string, number or boolean: {other}"
                    ));
                }
            };
            Ok((key.clone(), text))
        })
        .collect()
}

/// The directories the patterns select, sorted, each with `path`,
/// `path.basename`, `path.basenameNormalized` and `path[n]` (as Argo CD's
/// Git directory generator).
pub fn git_directories(git: &GitGenerator, directories: &[String]) -> Vec<Params> {
    let mut chosen: Vec<&String> = directories
        .iter()
        .filter(|dir| {
            let matching = |exclude: bool| {
                git.directories
                    .iter()
                    .filter(|p| p.exclude == exclude)
                    .any(|p| glob::matches(&p.path, dir))
            };
            matching(false) && !matching(true)
        })
        .collect();
    chosen.sort();
    chosen.dedup();
    chosen.into_iter().map(|dir| path_params(dir)).collect()
}

fn path_params(dir: &str) -> Params {
    let segments: Vec<&str> = dir.split('/').filter(|s| !s.is_empty()).collect();
    let basename = segments.last().copied().unwrap_or_default();
    let mut params = Params::new();
    params.insert("path".into(), segments.join("/"));
    params.insert("path.basename".into(), basename.to_string());
    params.insert("path.basenameNormalized".into(), normalized(basename));
    for (i, segment) in segments.iter().enumerate() {
        params.insert(format!("path[{i}]"), segment.to_string());
    }
    params
}

/// A name made fit for Kubernetes: lower case, `-` for anything else.
pub fn normalized(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '.' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect()
}

/// The clusters the selector picks, local first if asked, each with
/// `name`, `nameNormalized`, `server` and `metadata.labels.KEY`.
pub fn clusters(spec: &ClustersGenerator, registered: &[Cluster]) -> Vec<Params> {
    let wanted = &spec.selector.match_labels;
    let local = Cluster {
        name: LOCAL_CLUSTER.into(),
        server: LOCAL_SERVER.into(),
        labels: BTreeMap::new(),
    };
    let local = (spec.include_local && wanted.is_empty()).then_some(&local);
    let mut picked: Vec<&Cluster> = registered
        .iter()
        .filter(|c| wanted.iter().all(|(k, v)| c.labels.get(k) == Some(v)))
        .collect();
    picked.sort_by(|a, b| a.name.cmp(&b.name));
    local
        .into_iter()
        .chain(picked)
        .map(|cluster| {
            let mut params = Params::new();
            params.insert("name".into(), cluster.name.clone());
            params.insert("nameNormalized".into(), normalized(&cluster.name));
            params.insert("server".into(), cluster.server.clone());
            for (key, value) in &cluster.labels {
                params.insert(format!("metadata.labels.{key}"), value.clone());
            }
            params
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generators(yaml: &str) -> Vec<Generator> {
        let values: Vec<Value> = serde_saphyr::from_str(yaml).unwrap();
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Generator::parse(v, &format!("generators[{i}]")).unwrap())
            .collect()
    }

    /// What the generators written in `yaml` give with `facts`.
    fn generated(yaml: &str, facts: &Facts) -> Vec<Generated> {
        generate(&generators(yaml), facts).unwrap()
    }

    /// Why the generators written in `yaml` give nothing with `facts`.
    fn refused(yaml: &str, facts: &Facts) -> GenerateError {
        generate(&generators(yaml), facts).unwrap_err()
    }

    fn repo_facts(dirs: &[&str]) -> Facts {
        let mut facts = Facts::default();
        facts.directories.insert(
            ("https://git.example/mono.git".into(), "HEAD".into()),
            Ok(dirs.iter().map(|d| d.to_string()).collect()),
        );
        facts
    }

    fn values(generated: &[Generated], key: &str) -> Vec<String> {
        generated.iter().map(|g| g.params[key].clone()).collect()
    }

    #[test]
    fn a_list_generator_gives_each_element_with_numbers_as_text() {
        let made = generated(
            "- list:\n    elements:\n      - {env: dev, replicas: 1}\n      - {env: prod, replicas: 3}\n",
            &Facts::default(),
        );
        assert_eq!(values(&made, "env"), ["dev", "prod"]);
        assert_eq!(values(&made, "replicas"), ["1", "3"]);
        assert_eq!(made[0].generator, "generators[0].list");
    }

    #[test]
    fn a_nested_list_value_is_refused_naming_the_element() {
        let error = refused(
            "- list:\n    elements:\n      - {env: [a]}\n",
            &Facts::default(),
        );
        assert_eq!(error.generator, "generators[0].list");
        assert!(
            error.reason.starts_with("elements[0]: parameter env"),
            "{error}"
        );
    }

    #[test]
    fn git_directories_follow_globs_and_excludes() {
        let facts = repo_facts(&[
            "apps",
            "apps/shop",
            "apps/shop/base",
            "apps/cart",
            "apps/legacy",
            "docs",
        ]);
        let made = generated(
            "- git:\n    repoURL: https://git.example/mono.git\n    directories:\n      - path: apps/*\n      - path: apps/legacy\n        exclude: true\n",
            &facts,
        );
        assert_eq!(values(&made, "path"), ["apps/cart", "apps/shop"]);
        assert_eq!(values(&made, "path.basename"), ["cart", "shop"]);
        assert_eq!(values(&made, "path[0]"), ["apps", "apps"]);
        assert_eq!(values(&made, "path[1]"), ["cart", "shop"]);
    }

    #[test]
    fn a_repository_that_could_not_be_read_is_an_error_naming_the_generator() {
        let mut facts = Facts::default();
        facts.directories.insert(
            ("https://git.example/mono.git".into(), "main".into()),
            Err("revision main not found".into()),
        );
        let error = refused(
            "- git:\n    repoURL: https://git.example/mono.git\n    revision: main\n    directories: [{path: '*'}]\n",
            &facts,
        );
        assert_eq!(
            error.to_string(),
            "generators[0].git: https://git.example/mono.git at main: revision main not found"
        );
    }

    #[test]
    fn clusters_are_picked_by_label_and_the_local_one_only_if_asked() {
        let registered = vec![
            Cluster {
                name: "eu-1".into(),
                server: "https://eu-1.example".into(),
                labels: [("env".to_string(), "prod".to_string())].into(),
            },
            Cluster {
                name: "Staging_A".into(),
                server: "https://staging.example".into(),
                labels: [("env".to_string(), "staging".to_string())].into(),
            },
        ];
        let facts = Facts {
            clusters: registered,
            ..Facts::default()
        };
        let all = generated("- clusters: {includeLocal: true}\n", &facts);
        assert_eq!(values(&all, "name"), ["in-cluster", "Staging_A", "eu-1"]);
        assert_eq!(values(&all, "nameNormalized")[1], "staging-a");
        let prod = generated(
            "- clusters: {includeLocal: true, selector: {matchLabels: {env: prod}}}\n",
            &facts,
        );
        assert_eq!(values(&prod, "server"), ["https://eu-1.example"]);
        assert_eq!(values(&prod, "metadata.labels.env"), ["prod"]);
    }

    #[test]
    fn a_matrix_gives_every_combination_of_its_two_generators() {
        let facts = repo_facts(&["apps/shop", "apps/cart"]);
        let made = generated(
            "- matrix:\n    generators:\n      - git:\n          repoURL: https://git.example/mono.git\n          directories: [{path: apps/*}]\n      - list:\n          elements: [{env: dev}, {env: prod}]\n",
            &facts,
        );
        let pairs: Vec<String> = made
            .iter()
            .map(|g| format!("{}-{}", g.params["path.basename"], g.params["env"]))
            .collect();
        assert_eq!(pairs, ["cart-dev", "cart-prod", "shop-dev", "shop-prod"]);
        assert_eq!(made[0].generator, "generators[0].matrix");
    }

    #[test]
    fn a_matrix_of_one_generator_or_clashing_parameters_is_refused() {
        let one = refused(
            "- matrix:\n    generators:\n      - list: {elements: [{a: x}]}\n",
            &Facts::default(),
        );
        assert!(one.reason.contains("exactly two"), "{one}");
        let clash = refused(
            "- matrix:\n    generators:\n      - list: {elements: [{a: x}]}\n      - list: {elements: [{a: y}]}\n",
            &Facts::default(),
        );
        assert!(clash.reason.contains("parameter a"), "{clash}");
    }

    #[test]
    fn an_unknown_generator_is_refused_naming_its_place() {
        let error =
            Generator::parse(&serde_json::json!({"scmProvider": {}}), "generators[2]").unwrap_err();
        assert_eq!(error.generator, "generators[2]");
        assert!(error.reason.contains("list, git, clusters, matrix"));
    }

    #[test]
    fn the_repositories_a_matrix_reads_are_its_git_generators() {
        let parsed = generators(
            "- matrix:\n    generators:\n      - git: {repoURL: u, revision: main, secretRef: {name: mono-creds}, directories: [{path: '*'}]}\n      - clusters: {}\n",
        );
        assert_eq!(
            parsed[0].repositories(),
            [(
                "u".to_string(),
                "main".to_string(),
                Some("mono-creds".to_string())
            )]
        );
    }
}
