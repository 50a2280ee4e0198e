//! What a source is: the part of an Application's spec that says where its
//! desired state lives and how to turn it into objects.
//!
//! ```
//! let source: tether_source::Source = serde_json::from_value(serde_json::json!({
//!     "repoURL": "https://git.example.com/shop.git",
//!     "revision": ">=1.2.0 <2.0.0",
//!     "path": "apps/web",
//!     "renderer": {"kustomize": {}},
//!     "verify": {"mode": "tag"},
//! })).unwrap();
//! assert_eq!(source.path, "apps/web");
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
pub use tether_core::verify::VerifyMode;

use crate::detect::RendererKind;
use crate::directory::DirectoryOptions;

/// Where an application's desired state lives and how it is rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Source {
    /// The source's name among an Application's `sources` (Argo CD calls
    /// it `ref`): a Helm source reads another's files as `$NAME/path` in
    /// its `valueFiles`. A named Git source without a `path` renders
    /// nothing; it only lends its files.
    #[serde(default, alias = "ref", skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// A Git repository: `file://`, `http(s)://`, `ssh://`, `git://` or
    /// scp-like `git@host:path`. With `chart`, a Helm repository
    /// (`http(s)://…` serving `index.yaml`) or an OCI registry path
    /// (`oci://registry/path`).
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// The chart's name in the Helm repository or under the OCI path at
    /// `repoURL` (as Argo CD's `chart`); empty for a Git source.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub chart: String,
    /// The chart's version: exact (`1.2.3`), a range (`1.2.x`, `>=1.2 <2`,
    /// `^1.2`), empty for the highest stable; for OCI also a manifest
    /// digest (`sha256:…`, or `1.2.3@sha256:…`). For an OCI artifact (an
    /// `oci://` repoURL without chart): a tag as written (default
    /// `latest`), a range over its tags, or a digest.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Plain HTTP to an `oci://` registry (Flux's `insecure`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// A branch, a tag, a semver range over tags (`>=1.2.0 <2.0.0`,
    /// `1.4.*`), a full commit SHA, or empty for the remote's HEAD.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub revision: String,
    /// Directory inside the repository; empty for the root.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    #[serde(default)]
    pub renderer: Renderer,
    #[serde(default)]
    pub verify: Verification,
    /// The Secret holding the credentials to read the repository, in the
    /// Application's namespace (see `Credentials::from_data` for its keys).
    #[serde(default, rename = "secretRef", skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
    /// How often the repository is asked whether the revision moved
    /// (`10s`, `3m`; default: the controller's `--poll-interval`, 3m).
    /// Apps on one repository share one poll, at the shortest interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

/// A Secret, by name, in the namespace of whatever refers to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SecretRef {
    pub name: String,
}

/// How the files at `path` become objects.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Renderer {
    /// YAML and JSON files, read natively.
    Directory(DirectoryOptions),
    /// `kustomize build`, or `kubectl kustomize`.
    Kustomize(KustomizeOptions),
    /// `helm template` of the chart at `path`.
    Helm(HelmOptions),
    /// Jsonnet, evaluated natively.
    Jsonnet(JsonnetOptions),
}

impl Default for Renderer {
    fn default() -> Self {
        Renderer::Directory(DirectoryOptions::default())
    }
}

impl Source {
    /// Whether nothing was given (an Application with `sources` instead).
    pub fn is_unset(&self) -> bool {
        self.repo_url.is_empty()
    }

    /// Whether this is a chart from a Helm repository or OCI registry.
    pub fn is_chart(&self) -> bool {
        !self.chart.is_empty()
    }

    /// Whether this is an OCI artifact of files (`oci://…` without a
    /// chart, as `flux push artifact` publishes them).
    pub fn is_artifact(&self) -> bool {
        self.chart.is_empty() && self.repo_url.starts_with("oci://")
    }

    /// Whether this is read from a Helm repository or an OCI registry
    /// rather than Git.
    pub fn is_package(&self) -> bool {
        self.is_chart() || self.is_artifact()
    }

    /// How a chart source is rendered: Helm, with its options when the
    /// source gives them, the release named after the chart by default.
    pub fn chart_renderer(&self) -> Renderer {
        let mut options = match &self.renderer {
            Renderer::Helm(options) => options.clone(),
            _ => HelmOptions::default(),
        };
        if options.release_name.is_empty() {
            options.release_name = self.chart.clone();
        }
        Renderer::Helm(options)
    }

    /// Whether the source renders objects: all but a named Git source
    /// without a path, which only lends its files to `$NAME/…` references.
    pub fn renders(&self) -> bool {
        self.is_package() || self.name.is_empty() || !self.path.trim_matches('/').is_empty()
    }

    /// Pins the source to `revision`: a Git revision, or a chart's or
    /// artifact's version.
    pub fn pin(&mut self, revision: &str) {
        match self.is_package() {
            true => self.version = revision.to_string(),
            false => self.revision = revision.to_string(),
        }
    }

    /// Whether rendering depends on the destination cluster's capabilities
    /// (Helm's does, so every chart source's).
    pub fn uses_capabilities(&self) -> bool {
        self.is_chart() || self.renderer.uses_capabilities()
    }

    /// Whether a push that changed `paths` (relative to the repository
    /// root) can change what this source renders: a path under its
    /// directory, or any path at all for a renderer that reads outside it.
    pub fn affected_by(&self, paths: &[String]) -> bool {
        let dir = self.path.trim_start_matches("./").trim_matches('/');
        if self.renderer.reads_outside() || dir.is_empty() || dir == "." {
            return true;
        }
        paths.iter().any(|path| {
            path.strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'))
        })
    }
}

impl Renderer {
    /// Whether rendering may read files outside the application's path:
    /// Kustomize (`../base`), Jsonnet (imports), Helm with a value file
    /// named through `..`.
    pub fn reads_outside(&self) -> bool {
        match self {
            Renderer::Directory(_) => false,
            Renderer::Helm(options) => options.value_files.iter().any(|f| f.contains("..")),
            Renderer::Kustomize(_) | Renderer::Jsonnet(_) => true,
        }
    }

    /// The renderer the files directly in a directory call for (see
    /// [`crate::detect`]), with default options but the Jsonnet entry file.
    ///
    /// ```
    /// use tether_source::Renderer;
    /// assert_eq!(Renderer::detect(&["Chart.yaml", "values.yaml"]).name(), "helm");
    /// ```
    pub fn detect<S: AsRef<str>>(names: &[S]) -> Renderer {
        Renderer::detected(&crate::detect::detect(names))
    }

    /// The renderer a [`crate::detect::Detection`] names.
    pub fn detected(detection: &crate::detect::Detection) -> Renderer {
        match Renderer::of_kind(detection.kind) {
            Renderer::Jsonnet(options) => Renderer::Jsonnet(JsonnetOptions {
                main: detection.jsonnet_main.clone(),
                ..options
            }),
            renderer => renderer,
        }
    }

    /// The renderer of `kind`, with default options.
    pub fn of_kind(kind: RendererKind) -> Renderer {
        match kind {
            RendererKind::Directory => Renderer::Directory(DirectoryOptions::default()),
            RendererKind::Kustomize => Renderer::Kustomize(KustomizeOptions {}),
            RendererKind::Helm => Renderer::Helm(HelmOptions::default()),
            RendererKind::Jsonnet => Renderer::Jsonnet(JsonnetOptions::default()),
        }
    }

    /// Which of the four renderers this is.
    pub fn kind(&self) -> RendererKind {
        match self {
            Renderer::Directory(_) => RendererKind::Directory,
            Renderer::Kustomize(_) => RendererKind::Kustomize,
            Renderer::Helm(_) => RendererKind::Helm,
            Renderer::Jsonnet(_) => RendererKind::Jsonnet,
        }
    }

    /// Whether the output depends on the destination cluster's
    /// capabilities (its version and API versions): Helm's does.
    pub fn uses_capabilities(&self) -> bool {
        matches!(self, Renderer::Helm(_))
    }

    /// The renderer's name, as used in origins and messages.
    pub fn name(&self) -> &'static str {
        self.kind().as_str()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KustomizeOptions {}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HelmOptions {
    /// Release name (default: the last component of `path`, or `release`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub release_name: String,
    /// Namespace passed to `helm template --namespace`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Values files, relative to the chart directory, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub value_files: Vec<String>,
    /// Inline values as a YAML document, applied after the files.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub values: String,
}

/// How a Jsonnet program is evaluated.
///
/// Variables and arguments are maps from name to value, as the `jsonnet`
/// command's `--ext-str`/`--ext-code`/`--tla-str`/`--tla-code` flags take
/// them (Argo CD spells the same as lists of `{name, value, code}`): a
/// name is set once, either as a string or as code; setting it in both
/// maps is an error that names it.
///
/// ```
/// let options: tether_source::spec::JsonnetOptions = serde_json::from_value(serde_json::json!({
///     "tlas": {"env": "prod"},
///     "tlaCode": {"replicas": "3"},
///     "extCode": {"features": "{canary: true}"},
/// })).unwrap();
/// assert_eq!(options.tlas["env"], "prod");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JsonnetOptions {
    /// Entry file relative to `path` (default `main.jsonnet`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub main: String,
    /// External variables (`std.extVar`), as strings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ext_vars: BTreeMap<String, String>,
    /// External variables whose values are Jsonnet code (`--ext-code`),
    /// evaluated as if written in the entry file (imports are relative to it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ext_code: BTreeMap<String, String>,
    /// Top-level arguments, as strings (`--tla-str`): when the entry file
    /// evaluates to a function, it is called with these named arguments.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tlas: BTreeMap<String, String>,
    /// Top-level arguments whose values are Jsonnet code (`--tla-code`):
    /// `"3"` is the number 3, `"{a: 1}"` an object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tla_code: BTreeMap<String, String>,
}

/// Which signatures a revision must carry before it is rendered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    #[serde(default)]
    pub mode: VerifyMode,
    /// Trusted OpenPGP public keys, ASCII-armored.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub openpgp_keys: Vec<String>,
    /// Trusted SSH keys in `allowed_signers` format (`principal key-type key`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub allowed_signers: String,
}

/// A revision, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revision {
    /// The remote's HEAD.
    Head,
    /// A full commit id.
    Commit(String),
    /// The highest tag whose version matches.
    Range(semver::VersionReq),
    /// A branch or tag name (tags win, as in `git rev-parse`), or a full ref.
    Name(String),
}

impl Revision {
    /// Classifies `text`. A range needs an operator or wildcard (`1.4.*`,
    /// `>=1.2.0 <2.0.0`, `^1.2`); a plain `1.2.3` or `v1.2.3` is a tag name.
    pub fn parse(text: &str) -> Result<Revision, String> {
        let text = text.trim();
        if text.is_empty() || text == "HEAD" {
            return Ok(Revision::Head);
        }
        if text.len() == 40 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(Revision::Commit(text.to_ascii_lowercase()));
        }
        if text.contains(['<', '>', '=', '~', '^', '*', ' ', ',']) {
            let comparators: Vec<&str> = text
                .split([' ', ','])
                .filter(|part| !part.is_empty())
                .collect();
            return comparators
                .join(", ")
                .parse()
                .map(Revision::Range)
                .map_err(|error| format!("revision {text:?} is not a semver range: {error}"));
        }
        Ok(Revision::Name(text.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_classified_as_head_commit_range_or_name() {
        assert_eq!(Revision::parse("").unwrap(), Revision::Head);
        let sha = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d";
        assert_eq!(Revision::parse(sha).unwrap(), Revision::Commit(sha.into()));
        assert_eq!(
            Revision::parse("v1.2.3").unwrap(),
            Revision::Name("v1.2.3".into())
        );
        assert_eq!(
            Revision::parse("main").unwrap(),
            Revision::Name("main".into())
        );
        let Revision::Range(range) = Revision::parse(">=1.2.0 <2.0.0").unwrap() else {
            panic!()
        };
        assert!(range.matches(&"1.9.0".parse().unwrap()));
        assert!(!range.matches(&"2.0.0".parse().unwrap()));
        let Revision::Range(star) = Revision::parse("1.4.*").unwrap() else {
            panic!()
        };
        assert!(star.matches(&"1.4.7".parse().unwrap()));
        assert!(Revision::parse(">=banana").is_err());
    }

    #[test]
    fn a_push_affects_a_source_through_its_directory_or_what_its_renderer_reads() {
        let source = |path: &str, renderer: serde_json::Value| -> Source {
            serde_json::from_value(serde_json::json!({
                "repoURL": "https://example.com/shop.git", "path": path, "renderer": renderer
            }))
            .unwrap()
        };
        let changed = ["apps/web/deploy.yaml".to_string(), "README.md".to_string()];
        let directory = serde_json::json!({"directory": {}});
        assert!(source("apps/web", directory.clone()).affected_by(&changed));
        assert!(source("./apps/web/", directory.clone()).affected_by(&changed));
        assert!(!source("apps/we", directory.clone()).affected_by(&changed));
        assert!(!source("apps/api", directory.clone()).affected_by(&changed));
        assert!(source("", directory.clone()).affected_by(&changed));
        assert!(!source("apps/api", directory).affected_by(&[]));
        // Kustomize may read ../base: any change may matter.
        assert!(source("apps/api", serde_json::json!({"kustomize": {}})).affected_by(&changed));
        let helm = |files: &[&str]| serde_json::json!({"helm": {"valueFiles": files}});
        assert!(!source("apps/api", helm(&["prod.yaml"])).affected_by(&changed));
        assert!(source("apps/api", helm(&["../shared.yaml"])).affected_by(&changed));
    }

    #[test]
    fn a_detection_becomes_a_renderer_with_default_options() {
        assert_eq!(Renderer::detect(&["deploy.yaml"]), Renderer::default());
        assert_eq!(
            Renderer::detect(&["kustomization.yml"]),
            Renderer::Kustomize(KustomizeOptions {})
        );
        assert_eq!(
            Renderer::detect(&["Chart.yaml"]),
            Renderer::Helm(HelmOptions::default())
        );
        assert_eq!(
            Renderer::detect(&["main.jsonnet", "x.jsonnet"]),
            Renderer::Jsonnet(JsonnetOptions::default())
        );
        let Renderer::Jsonnet(options) = Renderer::detect(&["guestbook.jsonnet"]) else {
            panic!()
        };
        assert_eq!(options.main, "guestbook.jsonnet");
    }

    #[test]
    fn a_source_reads_from_the_application_spec_with_defaults() {
        let source: Source = serde_json::from_value(serde_json::json!({
            "repoURL": "git@example.com:shop.git",
            "renderer": {"helm": {"releaseName": "web", "valueFiles": ["prod.yaml"]}},
            "verify": {"mode": "tag-and-head", "allowedSigners": "ops ssh-ed25519 AAAA"}
        }))
        .unwrap();
        assert_eq!(source.revision, "");
        assert_eq!(source.renderer.name(), "helm");
        assert_eq!(source.verify.mode, VerifyMode::TagAndHead);
        let plain: Source = serde_json::from_value(serde_json::json!({"repoURL": "x"})).unwrap();
        assert_eq!(plain.renderer, Renderer::default());
    }
}
