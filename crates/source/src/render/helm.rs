//! `helm template` of the chart at the application's path, for the
//! destination cluster: its version (`--kube-version`) and served API
//! versions (`--api-versions`) make `.Capabilities` answer as a real
//! install would, so `kubeVersion` constraints and
//! `.Capabilities.APIVersions.Has` branches hold.

use std::path::Path;

use super::{Binary, Capabilities, RenderError, Sandbox, check_relative, find_program, run_binary};
use crate::files::Files;
use crate::limits::Budget;
use crate::manifest::Manifest;
use crate::spec::HelmOptions;

/// Inline Helm values are fed on standard input, so nothing is written
/// next to the chart.
const INLINE_VALUES: &str = "/dev/stdin";

/// What a chart is rendered from and for.
pub(super) struct Target<'a> {
    pub repository: &'a Files,
    /// The chart's directory in the repository.
    pub path: &'a str,
    pub capabilities: &'a Capabilities,
}

pub(super) fn render(
    options: &HelmOptions,
    target: &Target<'_>,
    sandbox: &Sandbox,
    budget: &mut Budget,
) -> Result<Vec<Manifest>, RenderError> {
    super::helm_cluster_calls::check(target.repository, target.path)?;
    let program = find_program("helm", sandbox).ok_or_else(|| RenderError::NotInstalled {
        renderer: "helm".into(),
        tried: "`helm`".into(),
    })?;
    let args = args(options, target)?;
    let binary = Binary {
        renderer: "helm",
        program: &program,
        args: &args,
        inline_values: (!options.values.is_empty()).then_some(options.values.as_str()),
    };
    run_binary(&binary, target.repository, target.path, sandbox, budget)
}

/// The arguments of `helm template`.
fn args(options: &HelmOptions, target: &Target<'_>) -> Result<Vec<String>, RenderError> {
    let path = target.path;
    let release = if options.release_name.is_empty() {
        path.rsplit('/')
            .next()
            .filter(|s| !s.is_empty())
            .unwrap_or("release")
    } else {
        &options.release_name
    };
    let mut args = vec!["template".to_string(), release.to_string(), ".".into()];
    if !options.namespace.is_empty() {
        args.extend(["--namespace".into(), options.namespace.clone()]);
    }
    let capabilities = target.capabilities;
    if !capabilities.kube_version.is_empty() {
        args.extend(["--kube-version".into(), capabilities.kube_version.clone()]);
    }
    for api_version in &capabilities.api_versions {
        args.extend(["--api-versions".into(), api_version.clone()]);
    }
    for file in &options.value_files {
        let in_repo = Path::new(path).join(file);
        check_relative("valueFiles", &in_repo.to_string_lossy())?;
        // Followed through the repository's links, as helm will open it.
        target
            .repository
            .resolve(&in_repo.to_string_lossy())
            .map_err(|reason| RenderError::PathEscape {
                path: file.clone(),
                reason: format!("valueFiles leaves the repository ({reason})"),
            })?;
        args.extend(["--values".into(), file.clone()]);
    }
    if !options.values.is_empty() {
        args.extend(["--values".into(), INLINE_VALUES.into()]);
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target<'a>(capabilities: &'a Capabilities, repository: &'a Files) -> Target<'a> {
        Target {
            repository,
            path: "charts/web",
            capabilities,
        }
    }

    #[test]
    fn value_files_that_leave_the_repository_are_rejected() {
        let options = HelmOptions {
            value_files: vec!["../../../etc/passwd".into()],
            ..Default::default()
        };
        let (capabilities, files) = (Capabilities::default(), Files::default());
        let error = args(&options, &target(&capabilities, &files))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("valueFiles escapes the repository"),
            "{error}"
        );
    }

    #[test]
    fn the_clusters_version_and_api_versions_are_passed_when_known() {
        let files = Files::default();
        let unknown = Capabilities::default();
        let plain = args(&HelmOptions::default(), &target(&unknown, &files)).unwrap();
        assert_eq!(plain, ["template", "web", "."]);
        let served = [("apps/v1".to_string(), vec!["Deployment".to_string()])];
        let known = Capabilities::from_discovery("v1.34.1", "1", "34", served);
        let with = args(&HelmOptions::default(), &target(&known, &files)).unwrap();
        assert_eq!(
            with,
            [
                "template",
                "web",
                ".",
                "--kube-version",
                "v1.34.1",
                "--api-versions",
                "apps/v1",
                "--api-versions",
                "apps/v1/Deployment"
            ]
        );
    }
}
