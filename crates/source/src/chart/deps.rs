//! A chart's dependencies (`Chart.yaml` `dependencies`, or a v1 chart's
//! `requirements.yaml`), fetched before rendering and put in its `charts/`
//! directory, so that `helm template` — which runs without network — finds
//! them as if `helm dependency build` had run.
//!
//! A dependency already in `charts/` (as `NAME-VERSION.tgz` or a `NAME/`
//! directory) is used as it is. Otherwise the version in `Chart.lock` (or
//! `requirements.lock`) wins when it lists the dependency with the same
//! repository; else the highest version the constraint allows.
//! `file://` dependencies are copied from the chart's own files. The
//! source's credentials go only to dependencies on the source's own host.

use serde::Deserialize;

use super::{ChartError, Charts, Wanted};
use crate::credentials::Credentials;
use crate::files::{Entry, Files, in_dir};

#[derive(Debug, Default, Deserialize)]
struct Declared {
    #[serde(default)]
    dependencies: Vec<Dependency>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct Dependency {
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    repository: String,
}

/// Where a source's charts come from: its URL and credentials.
pub struct Origin<'a> {
    pub url: &'a str,
    pub credentials: Option<&'a Credentials>,
    pub insecure: bool,
}

/// Fetches the dependencies of the chart at `dir` (a `/`-separated path in
/// `files`, `""` for the root) that `charts/` lacks, and adds them there.
/// Returns what was added, as `NAME VERSION DIGEST` lines (for the render
/// cache key and messages).
pub fn vendor(
    files: &mut Files,
    dir: &str,
    charts: &Charts,
    origin: &Origin<'_>,
) -> Result<Vec<String>, ChartError> {
    let at = |name: &str| in_dir(dir, name);
    let declared = declared_in(files, &at("Chart.yaml"))?
        .into_iter()
        .chain(declared_in(files, &at("requirements.yaml"))?)
        .collect::<Vec<_>>();
    if declared.is_empty() {
        return Ok(Vec::new());
    }
    let locked: Vec<Dependency> = declared_in(files, &at("Chart.lock"))?
        .into_iter()
        .chain(declared_in(files, &at("requirements.lock"))?)
        .collect();
    let mut added = Vec::new();
    for dependency in declared {
        if vendored(files, &at("charts"), &dependency.name) {
            continue;
        }
        let repository = dependency.repository.trim();
        if let Some(path) = repository.strip_prefix("file://") {
            copy_local(files, dir, path, &dependency.name)?;
            continue;
        }
        let named = |reason: &str| ChartError::Invalid {
            url: at("Chart.yaml"),
            reason: format!("dependency {:?}: {reason}", dependency.name),
        };
        if repository.is_empty() {
            return Err(named("no repository, and not in charts/"));
        }
        if repository.starts_with('@') || repository.starts_with("alias:") {
            return Err(named(&format!(
                "repository {repository:?} names a `helm repo add` alias; write its URL"
            )));
        }
        let version = locked
            .iter()
            .find(|lock| lock.name == dependency.name && lock.repository.trim() == repository)
            .map_or(dependency.version.as_str(), |lock| lock.version.as_str());
        let wanted = Wanted {
            repo_url: repository,
            chart: &dependency.name,
            version,
            insecure: origin.insecure,
        };
        let credentials = super::same_host(&host_url(repository), &host_url(origin.url))
            .then_some(origin.credentials)
            .flatten();
        let resolved = charts.resolve(&wanted, credentials)?;
        let archive = charts.archive(&resolved, credentials)?;
        let name = format!("{}-{}.tgz", dependency.name, resolved.version);
        files
            .entries
            .insert(at(&format!("charts/{name}")), Entry::File(archive));
        added.push(format!(
            "{} {} {}",
            dependency.name, resolved.version, resolved.digest
        ));
    }
    Ok(added)
}

/// The dependencies a `Chart.yaml`, `requirements.yaml` or lock file lists.
fn declared_in(files: &Files, path: &str) -> Result<Vec<Dependency>, ChartError> {
    let Some(Entry::File(bytes)) = files.entries.get(path) else {
        return Ok(Vec::new());
    };
    let text = String::from_utf8_lossy(bytes);
    let declared: Declared =
        serde_saphyr::from_str(&text).map_err(|error| ChartError::Invalid {
            url: path.to_string(),
            reason: format!("does not parse: {error}"),
        })?;
    Ok(declared.dependencies)
}

/// Whether `charts/` holds chart `name` (a directory or an archive).
fn vendored(files: &Files, charts: &str, name: &str) -> bool {
    let dir = format!("{charts}/{name}/Chart.yaml");
    let archive = format!("{charts}/{name}-");
    files.entries.contains_key(&dir)
        || files
            .entries
            .range(archive.clone()..)
            .take_while(|(path, _)| path.starts_with(&archive))
            .any(|(path, _)| path.ends_with(".tgz") && !path[archive.len()..].contains('/'))
}

/// Copies the chart at `path` (relative to the chart at `dir`) into its
/// `charts/NAME/`, refusing a path that leaves the files.
fn copy_local(files: &mut Files, dir: &str, path: &str, name: &str) -> Result<(), ChartError> {
    let source = crate::files::join(dir, path).ok_or_else(|| ChartError::Invalid {
        url: format!("file://{path}"),
        reason: format!("dependency {name:?} leaves the repository"),
    })?;
    let copied = files.subdir(&source);
    if !copied.entries.contains_key("Chart.yaml") {
        return Err(ChartError::NotFound {
            url: format!("file://{path}"),
            reason: format!("dependency {name:?}: no Chart.yaml at {source}"),
        });
    }
    let target = in_dir(dir, &format!("charts/{name}"));
    for (file, entry) in copied.entries {
        files.entries.insert(format!("{target}/{file}"), entry);
    }
    Ok(())
}

/// An `oci://` URL as `https://` for comparing hosts.
fn host_url(url: &str) -> String {
    match url.strip_prefix("oci://") {
        Some(rest) => format!("https://{rest}"),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn charts() -> Charts {
        Charts::new(std::env::temp_dir().join("tether-deps-unit"))
    }

    const ORIGIN: Origin<'static> = Origin {
        url: "https://charts.example.com",
        credentials: None,
        insecure: false,
    };

    #[test]
    fn vendored_and_local_dependencies_need_no_network() {
        let mut chart = Files::of_texts(&[
            (
                "apps/web/Chart.yaml",
                "name: web\ndependencies:\n- name: redis\n  version: 1.x\n  repository: https://unreachable.invalid\n- name: common\n  repository: file://../common\n",
            ),
            ("apps/web/charts/redis-1.4.0.tgz", "archive"),
            ("apps/common/Chart.yaml", "name: common\n"),
            (
                "apps/common/templates/_helpers.tpl",
                "{{- define \"x\" }}{{ end }}",
            ),
        ]);
        let added = vendor(&mut chart, "apps/web", &charts(), &ORIGIN).unwrap();
        assert!(added.is_empty());
        assert!(
            chart
                .entries
                .contains_key("apps/web/charts/common/templates/_helpers.tpl")
        );
    }

    /// Why the chart whose `Chart.yaml` is `chart_yaml` cannot be vendored.
    fn refusal(chart_yaml: &str) -> String {
        let mut chart = Files::of_texts(&[("Chart.yaml", chart_yaml)]);
        vendor(&mut chart, "", &charts(), &ORIGIN)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_local_dependency_outside_the_files_or_an_alias_is_refused_naming_it() {
        let error =
            refusal("name: web\ndependencies:\n- name: evil\n  repository: file://../../etc\n");
        assert!(
            error.contains("dependency \"evil\" leaves the repository"),
            "{error}"
        );
        let error = refusal(
            "name: web\ndependencies:\n- name: db\n  version: 1.0.0\n  repository: \"@bitnami\"\n",
        );
        assert!(error.contains("Chart.yaml: dependency \"db\""), "{error}");
        assert!(error.contains("write its URL"), "{error}");
    }
}
