//! Sources read from a Helm repository or an OCI registry rather than Git:
//! charts (Helm repository or `oci://`) and OCI artifacts of files (Flux's
//! layout). Each is resolved to a version and a digest (what a poll
//! compares), verified when asked (a chart's Helm provenance), downloaded
//! once per digest, unpacked in memory and rendered — a chart with Helm,
//! its dependencies fetched first; an artifact's `path` with the source's
//! renderer. The render is cached by the digest (and any value files other
//! sources lend), so an unchanged version costs no download and no render.

use crate::cache::RenderCache;
use crate::chart::{ChartError, Resolved, Wanted};
use crate::credentials::Credentials;
use crate::files::Files;
use crate::lent::{Lent, lend_renderer};
use crate::manifest::Manifest;
use crate::render::{Capabilities, render};
use crate::repositories::{Rendered, Repositories, SourceError};
use crate::spec::{Source, VerifyMode};
use crate::verify::Verifier;

impl Repositories {
    /// The version a chart or artifact source resolves to now (for a Helm
    /// repository one conditional index read, shared within
    /// [`crate::chart::FRESH`]; for OCI, the tags and the manifest): what a
    /// poll compares.
    pub fn resolve_package(
        &self,
        source: &Source,
        credentials: Option<&Credentials>,
    ) -> Result<Resolved, SourceError> {
        let wanted = Wanted {
            repo_url: &source.repo_url,
            chart: &source.chart,
            version: &source.version,
            insecure: source.insecure,
        };
        match source.is_chart() {
            true => self.charts.resolve(&wanted, credentials),
            false => self.charts.resolve_artifact(&wanted, credentials),
        }
        .map_err(|error| package_error(source, error))
    }

    /// [`Repositories::render_package`] of a chart source, alone.
    pub fn render_chart(
        &self,
        source: &Source,
        credentials: Option<&Credentials>,
        capabilities: &Capabilities,
    ) -> Result<Rendered, SourceError> {
        self.render_package(source, credentials, capabilities, &Lent::default())
    }

    /// Resolves, verifies, fetches and renders a chart or artifact source,
    /// a Helm renderer's `$NAME/…` value files read from `lent`.
    pub(crate) fn render_package(
        &self,
        source: &Source,
        credentials: Option<&Credentials>,
        capabilities: &Capabilities,
        lent: &Lent,
    ) -> Result<Rendered, SourceError> {
        let resolved = self.resolve_package(source, credentials)?;
        // Verified before anything is rendered (or a render reused).
        let verified_by = self.verified(source, &resolved, credentials)?;
        // A chart renders at its root with Helm; an artifact at its path.
        let (renderer, dir) = match source.is_chart() {
            true => (source.chart_renderer(), ""),
            false => (source.renderer.clone(), source.path.as_str()),
        };
        let (renderer, lent_digest) = lend_renderer(&mut Files::default(), "", &renderer, lent)?;
        let render_package = || -> Result<Vec<Manifest>, SourceError> {
            let files = self.unpacked(source, &resolved, credentials, dir, lent)?;
            Ok(render(&renderer, &files, dir, &self.sandbox, capabilities)?)
        };
        // Keyed by what is rendered: the digest (or, without one, where it
        // is and its version) and what other sources lend.
        let what = match resolved.digest.is_empty() {
            true => format!("{} {}{lent_digest}", resolved.url(), resolved.version),
            false => format!("{}{lent_digest}", resolved.digest),
        };
        let key = RenderCache::key(&what, &what, dir, &renderer, capabilities);
        let manifests = self.cached(key, render_package)?;
        Ok(Rendered::of_source(
            source,
            resolved.version,
            resolved.digest,
            None,
            manifests,
            verified_by,
        ))
    }

    /// The keys that signed `resolved`, as its source asks: a chart's Helm
    /// provenance; nothing else can be verified yet, so asking for more is
    /// refused rather than ignored.
    fn verified(
        &self,
        source: &Source,
        resolved: &Resolved,
        credentials: Option<&Credentials>,
    ) -> Result<Vec<String>, SourceError> {
        let refused = |reason: String| {
            package_error(
                source,
                ChartError::Invalid {
                    url: source.repo_url.clone(),
                    reason,
                },
            )
        };
        match (source.verify.mode, source.is_chart()) {
            (VerifyMode::None, _) => Ok(Vec::new()),
            (VerifyMode::Provenance, true) => {
                let verifier = Verifier::new(&source.verify)?;
                let provenance = self
                    .charts
                    .provenance(resolved, credentials)
                    .map_err(|error| package_error(source, error))?;
                let file = format!("{}-{}.tgz", resolved.chart, resolved.version);
                let name = format!("chart {} {} provenance", resolved.chart, resolved.version);
                Ok(vec![verifier.verify_provenance(
                    &name,
                    &provenance,
                    &file,
                    &resolved.digest,
                )?])
            }
            (mode, true) => Err(refused(format!(
                "verify mode {mode:?} applies to Git sources; a chart is verified by its Helm provenance (mode provenance)"
            ))),
            (_, false) => Err(refused(
                "OCI signatures (cosign, notation) are not checked yet, so an artifact cannot be required to be verified".into(),
            )),
        }
    }

    /// The package's files: the archive (from disk by digest, or
    /// downloaded and checked), unpacked — a chart with its dependencies
    /// added — and the value files other sources lend copied in at `dir`.
    fn unpacked(
        &self,
        source: &Source,
        resolved: &Resolved,
        credentials: Option<&Credentials>,
        dir: &str,
        lent: &Lent,
    ) -> Result<Files, SourceError> {
        let failed = |error| package_error(source, error);
        let archive = self.charts.archive(resolved, credentials).map_err(failed)?;
        let invalid = |reason| {
            failed(ChartError::Invalid {
                url: resolved.url(),
                reason,
            })
        };
        let mut files = match source.is_chart() {
            true => {
                let name = format!("{}-{}.tgz", resolved.chart, resolved.version);
                let mut files = crate::chart::archive::unpack(&name, &archive).map_err(invalid)?;
                let origin = crate::chart::deps::Origin {
                    url: &source.repo_url,
                    credentials,
                    insecure: source.insecure,
                };
                crate::chart::deps::vendor(&mut files, "", &self.charts, &origin)
                    .map_err(failed)?;
                files
            }
            false => {
                let name = format!("{}:{}", source.repo_url, resolved.version);
                crate::chart::archive::unpack_tree(&name, &archive).map_err(invalid)?
            }
        };
        let renderer = match source.is_chart() {
            true => source.chart_renderer(),
            false => source.renderer.clone(),
        };
        lend_renderer(&mut files, dir, &renderer, lent)?;
        Ok(files)
    }
}

/// A package's error, said of the source: the chart and the version asked
/// for, or the artifact and its tag.
fn package_error(source: &Source, error: ChartError) -> SourceError {
    match source.is_chart() {
        true => SourceError::Chart {
            chart: source.chart.clone(),
            version: match source.version.is_empty() {
                true => "any version".into(),
                false => format!("version {}", source.version),
            },
            error,
        },
        false => SourceError::Artifact {
            tag: match source.version.is_empty() {
                true => "latest".into(),
                false => source.version.clone(),
            },
            error,
        },
    }
}
