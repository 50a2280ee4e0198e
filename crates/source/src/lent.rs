//! Files one source lends another: a Helm source's `valueFiles` entry
//! `$values/envs/prod.yaml` is the file `envs/prod.yaml` of the source named
//! `values` at its resolved revision (Argo CD's multi-source `$ref`).
//!
//! The lent files are copied into the chart's own directory under
//! [`LENT_DIR`] and the entry rewritten to point there, so `helm template`
//! reads them like any values file, in the sandbox, without network.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::files::{Entry, Files, in_dir, join};
use crate::spec::{HelmOptions, Renderer};

/// Where lent files are put inside a chart's directory.
pub const LENT_DIR: &str = ".tether-lent";

/// The files of the named sources, each at its resolved revision.
#[derive(Debug, Clone, Default)]
pub struct Lent {
    pub sources: BTreeMap<String, Files>,
}

/// Why a `$NAME/path` reference could not be followed.
#[derive(Debug, thiserror::Error)]
pub enum LentError {
    #[error("valueFiles {reference:?}: no source named {name:?} in spec.sources (named: {named})")]
    NoSuchSource {
        reference: String,
        name: String,
        named: String,
    },
    #[error("valueFiles {reference:?}: {reason}")]
    NoSuchFile { reference: String, reason: String },
}

/// `options` with every `$NAME/path` value file copied from `lent` into
/// `files` at `chart_dir/.tether-lent/NAME/path` and rewritten to it, and a
/// digest of what was copied (for the render cache key; empty when
/// nothing was).
pub fn lend(
    files: &mut Files,
    chart_dir: &str,
    options: &HelmOptions,
    lent: &Lent,
) -> Result<(HelmOptions, String), LentError> {
    let mut options = options.clone();
    let mut digest = Sha256::new();
    let mut any = false;
    for value_file in &mut options.value_files {
        let Some(reference) = value_file.strip_prefix('$') else {
            continue;
        };
        let (name, path) = reference.split_once('/').unwrap_or((reference, ""));
        let lender = lent
            .sources
            .get(name)
            .ok_or_else(|| LentError::NoSuchSource {
                reference: value_file.clone(),
                name: name.to_string(),
                named: match lent.sources.is_empty() {
                    true => "none".into(),
                    false => lent.sources.keys().cloned().collect::<Vec<_>>().join(", "),
                },
            })?;
        let missing = |reason: &str| LentError::NoSuchFile {
            reference: value_file.clone(),
            reason: reason.to_string(),
        };
        let path = join("", path).ok_or_else(|| missing("leaves the source's repository"))?;
        let real = lender
            .resolve(&path)
            .map_err(|reason| missing(&format!("leaves the source's repository ({reason})")))?;
        let Some(Entry::File(bytes)) = lender.entries.get(&real) else {
            return Err(missing(&format!("no file {path} in source {name:?}")));
        };
        let inside = format!("{LENT_DIR}/{name}/{path}");
        let at = in_dir(chart_dir, &inside);
        digest.update(inside.as_bytes());
        digest.update([0]);
        digest.update(bytes);
        any = true;
        files.entries.insert(at, Entry::File(bytes.clone()));
        *value_file = inside;
    }
    let digest = match any {
        true => hex::encode(digest.finalize()),
        false => String::new(),
    };
    Ok((options, digest))
}

/// [`lend`] for any renderer: only Helm reads value files, so any other is
/// returned as it is, with an empty digest and nothing copied.
pub fn lend_renderer(
    files: &mut Files,
    chart_dir: &str,
    renderer: &Renderer,
    lent: &Lent,
) -> Result<(Renderer, String), LentError> {
    match renderer {
        Renderer::Helm(options) => {
            let (options, digest) = lend(files, chart_dir, options, lent)?;
            Ok((Renderer::Helm(options), digest))
        }
        other => Ok((other.clone(), String::new())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lent() -> Lent {
        let values = Files::of_texts(&[("envs/prod/values.yaml", "replicas: 3\n")]);
        Lent {
            sources: BTreeMap::from([("values".to_string(), values)]),
        }
    }

    #[test]
    fn a_reference_is_copied_into_the_chart_and_rewritten_to_it() {
        let mut files = Files::of_texts(&[("charts/web/Chart.yaml", "name: web\n")]);
        let options = HelmOptions {
            value_files: vec!["values.yaml".into(), "$values/envs/prod/values.yaml".into()],
            ..Default::default()
        };
        let (rewritten, digest) = lend(&mut files, "charts/web", &options, &lent()).unwrap();
        assert_eq!(
            rewritten.value_files,
            ["values.yaml", ".tether-lent/values/envs/prod/values.yaml"]
        );
        assert!(
            files
                .entries
                .contains_key("charts/web/.tether-lent/values/envs/prod/values.yaml")
        );
        assert_eq!(digest.len(), 64);
    }

    #[test]
    fn an_unknown_source_a_missing_file_or_an_escape_is_named() {
        let mut files = Files::default();
        let with = |file: &str| HelmOptions {
            value_files: vec![file.into()],
            ..Default::default()
        };
        let error = lend(&mut files, "", &with("$vals/x.yaml"), &lent()).unwrap_err();
        assert!(
            error.to_string().contains("no source named \"vals\""),
            "{error}"
        );
        assert!(error.to_string().contains("named: values"), "{error}");
        let error = lend(&mut files, "", &with("$values/nope.yaml"), &lent()).unwrap_err();
        assert!(error.to_string().contains("no file nope.yaml"), "{error}");
        let error = lend(&mut files, "", &with("$values/../../etc/passwd"), &lent()).unwrap_err();
        assert!(error.to_string().contains("leaves"), "{error}");
    }
}
