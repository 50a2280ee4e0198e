//! Projects (multi-tenancy's second boundary): which namespaces' apps a
//! Project holds, and what those apps may read and change — repositories,
//! destination namespaces, kinds, signature verification. Argo CD's
//! AppProjects, with Tether's defaults for tenants: only the app's own
//! namespace, no cluster-scoped kinds, no local (`file://`) sources.
//!
//! [`project_of`] decides an app's project; [`admit_source`] checks the
//! app's own spec before anything is fetched; [`admit_objects`] checks
//! each rendered object before anything is read, dry-run or applied. A
//! cluster without Projects (or without one that claims an app's
//! namespace, and no Project `default`) is unrestricted, as before
//! Projects existed; an admin locks that down by creating `default`.

pub mod glob;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ObjectRef;

/// The project of apps no other project claims; without a Project of that
/// name they are unrestricted.
pub const DEFAULT_PROJECT: &str = "default";

/// An API group and kind, each a [`glob`] pattern (`""` is the core group).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindPattern {
    #[serde(default)]
    pub group: String,
    pub kind: String,
}

impl KindPattern {
    fn matches(&self, object: &ObjectRef) -> bool {
        glob::matches(&self.group, &object.group) && glob::matches(&self.kind, &object.kind)
    }
}

impl fmt::Display for KindPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.group.as_str() {
            "" => write!(f, "{}", self.kind),
            group => write!(f, "{group}/{}", self.kind),
        }
    }
}

/// The kinds of one scope (cluster-scoped or namespaced) a project allows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindRules {
    /// Allowed kinds; unset means the scope's default (cluster-scoped:
    /// none, namespaced: all), `[]` means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<KindPattern>>,
    /// Denied kinds, even when allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<KindPattern>,
}

/// What a Project's apps may do (its spec, less the description).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rules {
    /// Namespaces (patterns) whose Applications belong to this project.
    #[serde(default)]
    pub application_namespaces: Vec<String>,
    /// Repository URLs (patterns) its apps may be synced from; none if
    /// empty.
    #[serde(default)]
    pub source_repos: Vec<String>,
    /// Namespaces (patterns) its apps may change; empty means only each
    /// app's own namespace.
    #[serde(default)]
    pub destination_namespaces: Vec<String>,
    /// Registered clusters (patterns) its apps may deploy to
    /// (`spec.destination.cluster`); empty means only the cluster Tether
    /// runs in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub destination_clusters: Vec<String>,
    /// Sync windows for the project's apps (those whose name matches one
    /// of a window's `applications` patterns; every app when it has none),
    /// besides each app's own `syncPolicy.syncWindows`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sync_windows: Vec<ProjectWindow>,
    #[serde(default)]
    pub cluster_resources: KindRules,
    #[serde(default)]
    pub namespaced_resources: KindRules,
    /// Whether its apps may read local repositories (`file://` and
    /// paths): they reach the controller's own file system.
    #[serde(default)]
    pub allow_file_sources: bool,
    /// Whether every app must verify commit signatures.
    #[serde(default)]
    pub require_verification: bool,
}

/// A Project's sync window (see [`crate::sync_window`]) and the apps it
/// applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectWindow {
    #[serde(flatten)]
    pub window: crate::sync_window::WindowSpec,
    /// Application names (patterns) it applies to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applications: Vec<String>,
    /// Applications whose labels it applies to (`matchLabels`: every
    /// label given, with that value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<WindowSelector>,
}

/// Which Applications' labels a Project's sync window applies to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WindowSelector {
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

impl ProjectWindow {
    /// Whether it applies to the app named `app` with `labels`: to every
    /// app when it names neither patterns nor a selector, else to an app
    /// that either names (as Argo CD's windows match any of their lists).
    pub fn applies_to(&self, app: &str, labels: &BTreeMap<String, String>) -> bool {
        let by_name = glob::any(&self.applications, app);
        let by_labels = self.selector.as_ref().is_some_and(|selector| {
            selector
                .match_labels
                .iter()
                .all(|(key, value)| labels.get(key) == Some(value))
        });
        (self.applications.is_empty() && self.selector.is_none()) || by_name || by_labels
    }
}

impl Rules {
    /// The sync windows of this project that apply to the app `app` with
    /// `labels`.
    pub fn windows_for(
        &self,
        app: &str,
        labels: &BTreeMap<String, String>,
    ) -> Vec<crate::sync_window::SyncWindow> {
        self.sync_windows
            .iter()
            .filter(|window| window.applies_to(app, labels))
            .map(|window| window.window.window())
            .collect()
    }

    /// Whether an app of namespace `app_namespace` may change `namespace`.
    pub fn destination_allowed(&self, app_namespace: &str, namespace: &str) -> bool {
        match self.destination_namespaces.is_empty() {
            true => namespace == app_namespace,
            false => glob::any(&self.destination_namespaces, namespace),
        }
    }

    /// Whether its apps may deploy to registered cluster `cluster`.
    pub fn cluster_allowed(&self, cluster: &str) -> bool {
        glob::any(&self.destination_clusters, cluster)
    }

    fn destinations(&self, app_namespace: &str) -> String {
        match self.destination_namespaces.is_empty() {
            true => format!("{app_namespace} only (the Application's own)"),
            false => self.destination_namespaces.join(", "),
        }
    }
}

/// The project an app belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership<'a> {
    Project {
        name: &'a str,
        rules: &'a Rules,
    },
    /// No project claims it and there is no Project `default`.
    Unrestricted,
}

impl Membership<'_> {
    /// The project's name; `None` when unrestricted.
    pub fn name(&self) -> Option<&str> {
        match self {
            Membership::Project { name, .. } => Some(name),
            Membership::Unrestricted => None,
        }
    }
}

/// Why an app or one of its objects is outside its project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    Missing {
        project: String,
    },
    NotAdmitted {
        project: String,
        namespace: String,
        claimed_by: Vec<String>,
    },
    Ambiguous {
        namespace: String,
        projects: Vec<String>,
    },
    Repository {
        project: String,
        url: String,
        allowed: Vec<String>,
    },
    DotSegments {
        url: String,
    },
    FileSource {
        project: String,
        url: String,
    },
    Verification {
        project: String,
    },
    Destination {
        project: String,
        namespace: String,
        allowed: String,
    },
    Cluster {
        project: String,
        cluster: String,
        allowed: Vec<String>,
    },
    Object {
        project: String,
        object: ObjectRef,
        rule: ObjectRule,
    },
}

/// Which rule an object breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectRule {
    /// Its namespace is not among the destinations (as listed).
    Namespace { allowed: String },
    /// A cluster-scoped kind the project does not allow (as listed).
    ClusterKind { allowed: String },
    /// A namespaced kind outside `namespacedResources.allow` (as listed).
    NamespacedKind { allowed: String },
    /// A kind the project denies: the field and the pattern that matched.
    Denied {
        field: &'static str,
        pattern: KindPattern,
    },
}

fn listed(patterns: &[String]) -> String {
    match patterns.is_empty() {
        true => "none".into(),
        false => patterns.join(", "),
    }
}

fn kinds(allow: &Option<Vec<KindPattern>>, default: &str) -> String {
    match allow {
        None => default.into(),
        Some(kinds) if kinds.is_empty() => "none".into(),
        Some(kinds) => kinds
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Missing { project } => write!(f, "Project {project} does not exist"),
            Violation::NotAdmitted {
                project,
                namespace,
                claimed_by,
            } => {
                write!(
                    f,
                    "Project {project} does not hold Applications of namespace {namespace}"
                )?;
                match claimed_by.as_slice() {
                    [] => f.write_str(" (its spec.applicationNamespaces do not match)"),
                    claimed => write!(
                        f,
                        " (namespace {namespace} belongs to Project {})",
                        claimed.join(", ")
                    ),
                }
            }
            Violation::Ambiguous {
                namespace,
                projects,
            } => write!(
                f,
                "namespace {namespace} is claimed by Projects {}; name one in spec.project",
                projects.join(", ")
            ),
            Violation::Repository {
                project,
                url,
                allowed,
            } => write!(
                f,
                "repository {url} is not allowed by Project {project} (sourceRepos: {})",
                listed(allowed)
            ),
            Violation::DotSegments { url } => write!(
                f,
                "repository {url} has `.` or `..` path segments, which no Project rule matches"
            ),
            Violation::FileSource { project, url } => write!(
                f,
                "repository {url} is on the controller's file system, which Project {project} \
                 does not allow (allowFileSources: false)"
            ),
            Violation::Verification { project } => write!(
                f,
                "Project {project} requires signed commits (requireVerification); set \
                 spec.source.verify"
            ),
            Violation::Destination {
                project,
                namespace,
                allowed,
            } => write!(
                f,
                "destination namespace {namespace} is not allowed by Project {project} \
                 (destinationNamespaces: {allowed})"
            ),
            Violation::Cluster {
                project,
                cluster,
                allowed,
            } => write!(
                f,
                "destination cluster {cluster} is not allowed by Project {project} \
                 (destinationClusters: {})",
                match allowed.is_empty() {
                    true => "none: only the cluster Tether runs in".to_string(),
                    false => allowed.join(", "),
                }
            ),
            Violation::Object {
                project,
                object,
                rule,
            } => match rule {
                ObjectRule::Namespace { allowed } => write!(
                    f,
                    "{object}: namespace {} is not allowed by Project {project} \
                     (destinationNamespaces: {allowed})",
                    object.namespace.as_deref().unwrap_or_default()
                ),
                ObjectRule::ClusterKind { allowed } => write!(
                    f,
                    "{object}: cluster-scoped kind {} is not allowed by Project {project} \
                     (clusterResources.allow: {allowed})",
                    kind_of(object)
                ),
                ObjectRule::NamespacedKind { allowed } => write!(
                    f,
                    "{object}: kind {} is not allowed by Project {project} \
                     (namespacedResources.allow: {allowed})",
                    kind_of(object)
                ),
                ObjectRule::Denied { field, pattern } => write!(
                    f,
                    "{object}: kind {} is denied by Project {project} ({field}: {pattern})",
                    kind_of(object)
                ),
            },
        }
    }
}

fn kind_of(object: &ObjectRef) -> String {
    KindPattern {
        group: object.group.clone(),
        kind: object.kind.clone(),
    }
    .to_string()
}

/// The project of an app in `namespace` that names `named` (or none),
/// among `projects` (name, rules): the one it names if that one holds its
/// namespace; else the only one that claims its namespace; else
/// [`DEFAULT_PROJECT`]. Naming `default` from a namespace another project
/// claims is refused: a tenant cannot step out of its project.
pub fn project_of<'a>(
    namespace: &str,
    named: Option<&str>,
    projects: &'a [(String, Rules)],
) -> Result<Membership<'a>, Violation> {
    let claiming: Vec<&'a (String, Rules)> = projects
        .iter()
        .filter(|(_, rules)| glob::any(&rules.application_namespaces, namespace))
        .collect();
    let member = |(name, rules): &'a (String, Rules)| Membership::Project { name, rules };
    let default = || {
        projects
            .iter()
            .find(|(name, _)| name == DEFAULT_PROJECT)
            .map_or(Membership::Unrestricted, member)
    };
    let claimed_by = || claiming.iter().map(|(name, _)| name.clone()).collect();
    match named {
        Some(named) => match claiming.iter().find(|(name, _)| name == named) {
            Some(project) => Ok(member(project)),
            None if named == DEFAULT_PROJECT && claiming.is_empty() => Ok(default()),
            None if !projects.iter().any(|(name, _)| name == named) && named != DEFAULT_PROJECT => {
                Err(Violation::Missing {
                    project: named.into(),
                })
            }
            None => Err(Violation::NotAdmitted {
                project: named.into(),
                namespace: namespace.into(),
                claimed_by: claimed_by(),
            }),
        },
        None => match claiming.as_slice() {
            [] => Ok(default()),
            [only] => Ok(member(only)),
            _ => Err(Violation::Ambiguous {
                namespace: namespace.into(),
                projects: claimed_by(),
            }),
        },
    }
}

/// What of an app's own spec a project judges.
#[derive(Debug, Clone, Copy)]
pub struct AppSource<'a> {
    /// The app's namespace.
    pub namespace: &'a str,
    pub repo_url: &'a str,
    /// `spec.destination.namespace`.
    pub destination: &'a str,
    /// `spec.destination.cluster` (`None`: the cluster Tether runs in).
    pub cluster: Option<&'a str>,
    /// Whether the source verifies commit signatures.
    pub verifies: bool,
}

/// The violations of an app's own spec: its repository, its destination,
/// its verification. Checked before anything is fetched.
pub fn admit_source(membership: Membership<'_>, app: AppSource<'_>) -> Vec<Violation> {
    let Membership::Project { name, rules } = membership else {
        return Vec::new();
    };
    let project = name.to_string();
    let mut violations = Vec::new();
    if is_local(app.repo_url) && !rules.allow_file_sources {
        violations.push(Violation::FileSource {
            project: project.clone(),
            url: app.repo_url.into(),
        });
    } else if has_dot_segments(app.repo_url) {
        violations.push(Violation::DotSegments {
            url: app.repo_url.into(),
        });
    } else if !repository_allowed(&rules.source_repos, app.repo_url) {
        violations.push(Violation::Repository {
            project: project.clone(),
            url: app.repo_url.into(),
            allowed: rules.source_repos.clone(),
        });
    }
    if !rules.destination_allowed(app.namespace, app.destination) {
        violations.push(Violation::Destination {
            project: project.clone(),
            namespace: app.destination.into(),
            allowed: rules.destinations(app.namespace),
        });
    }
    if let Some(cluster) = app.cluster
        && !rules.cluster_allowed(cluster)
    {
        violations.push(Violation::Cluster {
            project: project.clone(),
            cluster: cluster.into(),
            allowed: rules.destination_clusters.clone(),
        });
    }
    if rules.require_verification && !app.verifies {
        violations.push(Violation::Verification { project });
    }
    violations
}

/// The violations of an app's rendered objects (`objects`, with their
/// namespaces as the API server will default them: `None` for
/// cluster-scoped kinds). Checked before any object is read or applied.
pub fn admit_objects<'o>(
    membership: Membership<'_>,
    app_namespace: &str,
    objects: impl IntoIterator<Item = &'o ObjectRef>,
) -> Vec<Violation> {
    let Membership::Project { name, rules } = membership else {
        return Vec::new();
    };
    objects
        .into_iter()
        .filter_map(|object| {
            let rule = object_rule(rules, app_namespace, object)?;
            Some(Violation::Object {
                project: name.into(),
                object: object.clone(),
                rule,
            })
        })
        .collect()
}

fn object_rule(rules: &Rules, app_namespace: &str, object: &ObjectRef) -> Option<ObjectRule> {
    let (scope, field, default_all) = match &object.namespace {
        None => (&rules.cluster_resources, "clusterResources.deny", false),
        Some(_) => (
            &rules.namespaced_resources,
            "namespacedResources.deny",
            true,
        ),
    };
    if let Some(namespace) = &object.namespace
        && !rules.destination_allowed(app_namespace, namespace)
    {
        return Some(ObjectRule::Namespace {
            allowed: rules.destinations(app_namespace),
        });
    }
    if let Some(pattern) = scope.deny.iter().find(|p| p.matches(object)) {
        return Some(ObjectRule::Denied {
            field,
            pattern: pattern.clone(),
        });
    }
    let allowed = match &scope.allow {
        None => default_all,
        Some(kinds) => kinds.iter().any(|p| p.matches(object)),
    };
    match (allowed, object.namespace.is_some()) {
        (true, _) => None,
        (false, false) => Some(ObjectRule::ClusterKind {
            allowed: kinds(&scope.allow, "none"),
        }),
        (false, true) => Some(ObjectRule::NamespacedKind {
            allowed: kinds(&scope.allow, "all"),
        }),
    }
}

/// Whether `url` names a repository on the controller's own file system
/// (`file://` or a path) rather than a remote.
pub fn is_local(url: &str) -> bool {
    let url = url.trim();
    match url.split_once("://") {
        Some((scheme, _)) => scheme.eq_ignore_ascii_case("file"),
        // scp-like `user@host:path` is remote; a `/` before `:` is a path.
        None => match url.split_once(':') {
            Some((host, _)) => host.contains('/') || host.is_empty(),
            None => true,
        },
    }
}

fn has_dot_segments(url: &str) -> bool {
    let path = url.split_once("://").map_or(url, |(_, rest)| rest);
    path.split(['/', ':'])
        .any(|segment| segment == "." || segment == "..")
}

/// Whether `url` matches one of `patterns`, as written or without a
/// trailing `/` or `.git`.
fn repository_allowed(patterns: &[String], url: &str) -> bool {
    let trimmed = url.trim_end_matches('/');
    let bare = trimmed.strip_suffix(".git").unwrap_or(trimmed);
    [url, trimmed, bare]
        .iter()
        .any(|form| glob::any(patterns, form))
}

#[cfg(test)]
mod tests;
