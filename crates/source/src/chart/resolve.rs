//! Which version a chart or artifact source names now: from a Helm
//! repository's index (read conditionally, shared within [`FRESH`]), or
//! from a registry's tags and manifests.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use sha2::{Digest, Sha256};

use super::http::{Got, Http};
use super::index::{self, Index};
use super::version::Constraint;
use super::{CachedIndex, ChartError, Charts, FRESH, Location, Resolved, Wanted, auth, oci};
use crate::credentials::Credentials;

impl Charts {
    /// The version `wanted` resolves to now.
    pub fn resolve(
        &self,
        wanted: &Wanted<'_>,
        credentials: Option<&Credentials>,
    ) -> Result<Resolved, ChartError> {
        if wanted.chart.is_empty() {
            return Err(ChartError::Invalid {
                url: wanted.repo_url.to_string(),
                reason: "no chart named".into(),
            });
        }
        if wanted.repo_url.starts_with("oci://") {
            return self.resolve_oci(wanted, credentials, Kind::Chart);
        }
        let url = wanted.repo_url.trim_end_matches('/');
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(ChartError::Invalid {
                url: url.to_string(),
                reason: "a chart repository is https://… (with an index.yaml) or oci://…".into(),
            });
        }
        let constraint =
            Constraint::parse(wanted.version).map_err(|reason| ChartError::Invalid {
                url: url.to_string(),
                reason,
            })?;
        let http = Http::new(url, credentials)?;
        let index = self.index(&http, url, credentials)?;
        let entry =
            index
                .choose(wanted.chart, &constraint)
                .map_err(|reason| ChartError::NotFound {
                    url: format!("{url}/index.yaml"),
                    reason,
                })?;
        let archive = index::archive_url(url, entry).map_err(|reason| ChartError::Invalid {
            url: url.to_string(),
            reason,
        })?;
        Ok(Resolved {
            chart: wanted.chart.to_string(),
            version: entry.version.clone(),
            digest: match entry.digest.is_empty() {
                true => String::new(),
                false => format!("sha256:{}", entry.digest.to_ascii_lowercase()),
            },
            location: Location::Http {
                url: archive,
                repository: url.to_string(),
            },
            provenance: None,
        })
    }

    /// The repository's index, read again only when older than [`FRESH`],
    /// and then conditionally.
    fn index(
        &self,
        http: &Http,
        url: &str,
        credentials: Option<&Credentials>,
    ) -> Result<Arc<Index>, ChartError> {
        let authorization = auth::for_repository(credentials);
        // Callers with other credentials (a login, or the CA the server
        // was checked against) never share a read.
        let mut fingerprint = Sha256::new();
        fingerprint.update(authorization.as_deref().unwrap_or_default());
        fingerprint.update([0]);
        fingerprint.update(
            credentials
                .and_then(Credentials::ca_cert)
                .unwrap_or_default(),
        );
        if let Some(Credentials::Http {
            client_cert: Some(client_cert),
            ..
        }) = credentials
        {
            fingerprint.update([0]);
            fingerprint.update(&client_cert.cert);
        }
        let key = format!("{url}\0{}", hex::encode(fingerprint.finalize()));
        let cached = self
            .lock_indexes()
            .get(&key)
            .map(|cached| (cached.etag.clone(), cached.index.clone(), cached.read));
        if let Some((_, index, read)) = &cached
            && read.elapsed() < FRESH
        {
            return Ok(index.clone());
        }
        let index_url = format!("{url}/index.yaml");
        let etag = cached.as_ref().and_then(|(etag, _, _)| etag.clone());
        self.index_requests.fetch_add(1, Ordering::Relaxed);
        let got = http
            .get(&index_url, authorization.as_deref(), &[], etag.as_deref())
            .map_err(|answer| answer.into_error(&index_url, authorization.is_some()))?;
        let (etag, index) = match (got, cached) {
            (Got::NotModified, Some((etag, index, _))) => {
                self.not_modified.fetch_add(1, Ordering::Relaxed);
                (etag, index)
            }
            (Got::NotModified, None) => {
                return Err(ChartError::Invalid {
                    url: index_url,
                    reason: "304 Not Modified to an unconditional request".into(),
                });
            }
            (Got::Body { bytes, etag }, _) => {
                let index = Index::parse(&bytes).map_err(|reason| ChartError::Invalid {
                    url: index_url.clone(),
                    reason,
                })?;
                (etag, Arc::new(index))
            }
        };
        self.lock_indexes().insert(
            key,
            CachedIndex {
                etag,
                index: index.clone(),
                read: Instant::now(),
            },
        );
        Ok(index)
    }

    /// The artifact `wanted` names (an `oci://` repository holding a
    /// tar+gzip layer of files, as `flux push artifact` makes them; `chart`
    /// is empty): by digest, by a semver range over its tags, or by a tag
    /// as written (default `latest`).
    pub fn resolve_artifact(
        &self,
        wanted: &Wanted<'_>,
        credentials: Option<&Credentials>,
    ) -> Result<Resolved, ChartError> {
        self.resolve_oci(wanted, credentials, Kind::Artifact)
    }

    fn resolve_oci(
        &self,
        wanted: &Wanted<'_>,
        credentials: Option<&Credentials>,
        kind: Kind,
    ) -> Result<Resolved, ChartError> {
        let invalid = |reason: String| ChartError::Invalid {
            url: wanted.repo_url.to_string(),
            reason,
        };
        let reference = oci::Reference::parse(wanted.repo_url, wanted.chart).map_err(invalid)?;
        let scheme = if wanted.insecure { "http" } else { "https" };
        let base = format!("{scheme}://{}", reference.registry);
        let http = Http::new(&base, credentials)?;
        let registry = self.registry(&http, &base, credentials);
        let repository = &reference.repository;
        let pick = pick(wanted, kind, &registry, repository)?;
        let reference = match &pick {
            Pick::Digest(digest) => digest.clone(),
            Pick::Tag(tag) => tag.clone(),
        };
        let (manifest, manifest_digest) = registry.manifest(repository, &reference)?;
        let layer = manifest
            .layers
            .iter()
            .find(|layer| kind.holds(&layer.media_type))
            .ok_or_else(|| ChartError::Invalid {
                url: format!("{base}/v2/{repository}/manifests/{reference}"),
                reason: kind.missing().to_string(),
            })?;
        let version = match pick {
            Pick::Tag(tag) => oci::version_of(&tag),
            // Pinned by digest: the version the manifest declares, if any.
            Pick::Digest(_) => [
                "org.opencontainers.image.version",
                "org.opencontainers.image.revision",
            ]
            .iter()
            .find_map(|key| manifest.annotations.get(*key).cloned())
            .unwrap_or(manifest_digest),
        };
        Ok(Resolved {
            chart: wanted.chart.to_string(),
            version,
            digest: layer.digest.clone(),
            location: Location::Oci {
                base,
                repository: repository.clone(),
            },
            provenance: manifest
                .layers
                .iter()
                .find(|layer| layer.media_type == oci::PROVENANCE_LAYER)
                .map(|layer| layer.digest.clone()),
        })
    }
}

/// What an OCI manifest holds: a Helm chart, or an artifact of files.
/// The manifest a wanted version names in a registry.
enum Pick {
    /// Pinned by digest (`1.2.3@sha256:…` or `sha256:…`).
    Digest(String),
    /// By tag: named, or the highest version among the repository's tags
    /// that a range allows.
    Tag(String),
}

/// Which manifest of `repository` `wanted`'s version names.
fn pick(
    wanted: &Wanted<'_>,
    kind: Kind,
    registry: &oci::Registry<'_>,
    repository: &str,
) -> Result<Pick, ChartError> {
    let (pinned, constraint) = match wanted.version.rsplit_once('@') {
        Some((version, digest)) => (Some(digest), version),
        None if wanted.version.starts_with("sha256:") => (Some(wanted.version), ""),
        None => (None, wanted.version),
    };
    let parsed = match kind {
        Kind::Chart => {
            Some(
                Constraint::parse(constraint).map_err(|reason| ChartError::Invalid {
                    url: wanted.repo_url.to_string(),
                    reason,
                })?,
            )
        }
        // An artifact's tag may be any name (`latest`, `main-3f2a1b`);
        // only a range picks among tags.
        Kind::Artifact => Constraint::parse(constraint)
            .ok()
            .filter(|c| !matches!(c, Constraint::Latest | Constraint::Exact(_))),
    };
    let tag = match (pinned, parsed) {
        (Some(digest), _) => return Ok(Pick::Digest(digest.to_string())),
        (None, None) if constraint.is_empty() => "latest".to_string(),
        (None, None) => constraint.to_string(),
        (None, Some(Constraint::Exact(version))) => oci::tag_of(&version.to_string()),
        (None, Some(constraint)) => {
            let tags = registry.tags(repository)?;
            let versions: Vec<String> = tags.iter().map(|tag| oci::version_of(tag)).collect();
            let best = constraint
                .highest(versions.iter().map(String::as_str))
                .ok_or_else(|| ChartError::NotFound {
                    url: format!("{}/v2/{repository}/tags/list", registry.base),
                    reason: index::no_match(
                        repository,
                        &constraint,
                        versions.iter().map(String::as_str),
                    ),
                })?;
            oci::tag_of(best)
        }
    };
    Ok(Pick::Tag(tag))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chart,
    Artifact,
}

impl Kind {
    fn holds(self, media_type: &str) -> bool {
        match self {
            Kind::Chart => media_type == oci::CHART_LAYER,
            Kind::Artifact => media_type == oci::FLUX_LAYER || media_type.ends_with("tar+gzip"),
        }
    }

    fn missing(self) -> &'static str {
        match self {
            Kind::Chart => {
                "not a Helm chart (no application/vnd.cncf.helm.chart.content.v1.tar+gzip layer)"
            }
            Kind::Artifact => "no tar+gzip layer of files (as `flux push artifact` makes)",
        }
    }
}
