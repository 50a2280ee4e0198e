//! Helm charts from Helm repositories (`https://…` with an `index.yaml`)
//! and OCI registries (`oci://…`), fetched by Tether itself: the version a
//! source asks for is resolved (exact or a range, the highest match), the
//! archive downloaded once, checked against its digest and kept on disk by
//! that digest, and its dependencies fetched the same way ([`deps`]) so
//! that `helm template` runs without network.
//!
//! Polling a Helm repository costs one conditional request (`If-None-Match`
//! with the index's `ETag`, answered `304`) per repository and interval;
//! callers within [`FRESH`] of each other share one index read.

pub mod archive;
pub mod auth;
pub mod deps;
mod http;
pub mod index;
pub mod oci;
mod resolve;
pub mod version;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use self::http::{Got, Http};
use self::index::Index;
use crate::credentials::Credentials;

/// How long an index read serves other callers without asking again: the
/// apps of one repository woken by one poll share its read.
pub const FRESH: Duration = Duration::from_secs(2);

/// Why a chart could not be had. Each names the URL it was reading.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("{url}: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("{url}: authentication failed: {reason}")]
    Unauthorized { url: String, reason: String },
    #[error("{url}: {reason}")]
    NotFound { url: String, reason: String },
    #[error("{url}: digest mismatch: expected {expected}, received {actual}")]
    DigestMismatch {
        url: String,
        expected: String,
        actual: String,
    },
    #[error("{url}: {reason}")]
    Invalid { url: String, reason: String },
}

impl ChartError {
    /// Whether retrying later may succeed unchanged (the server was down).
    pub fn is_retryable(&self) -> bool {
        matches!(self, ChartError::Unreachable { .. })
    }
}

/// What a chart source asks for.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// `https://…` (a Helm repository) or `oci://registry/path`.
    pub repo_url: &'a str,
    pub chart: &'a str,
    /// A version, a range, or empty for the highest stable; for OCI also a
    /// manifest digest (`sha256:…`).
    pub version: &'a str,
    /// Plain HTTP to an `oci://` registry.
    pub insecure: bool,
}

/// The chart version chosen for a [`Wanted`], and where its archive is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub chart: String,
    pub version: String,
    /// `sha256:…` of the archive (for OCI, the chart layer's digest).
    pub digest: String,
    location: Location,
    /// An OCI chart's provenance layer digest, when it has one.
    provenance: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Location {
    Http { url: String, repository: String },
    Oci { base: String, repository: String },
}

impl Resolved {
    /// Where the archive is read from, for messages.
    pub fn url(&self) -> String {
        match &self.location {
            Location::Http { url, .. } => url.clone(),
            Location::Oci { base, repository } => {
                format!("{base}/v2/{repository}/blobs/{}", self.digest)
            }
        }
    }
}

/// Requests chart sources made, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChartStats {
    /// Index reads sent (conditional or not).
    pub index_requests: u64,
    /// Of those, answered `304 Not Modified`.
    pub not_modified: u64,
    /// Archives downloaded (not found on disk).
    pub downloads: u64,
}

struct CachedIndex {
    etag: Option<String>,
    index: Arc<Index>,
    read: Instant,
}

/// The chart cache: archives on disk by digest, indexes in memory with
/// their `ETag`s, and the registry authorizations that worked.
pub struct Charts {
    dir: PathBuf,
    indexes: Mutex<HashMap<String, CachedIndex>>,
    authorizations: Mutex<HashMap<String, String>>,
    provenances: Mutex<HashMap<String, String>>,
    index_requests: AtomicU64,
    not_modified: AtomicU64,
    downloads: AtomicU64,
}

impl Charts {
    /// Keeps archives under `dir` (created when first needed).
    pub fn new(dir: PathBuf) -> Charts {
        Charts {
            dir,
            indexes: Mutex::new(HashMap::new()),
            authorizations: Mutex::new(HashMap::new()),
            provenances: Mutex::new(HashMap::new()),
            index_requests: AtomicU64::new(0),
            not_modified: AtomicU64::new(0),
            downloads: AtomicU64::new(0),
        }
    }

    pub fn stats(&self) -> ChartStats {
        ChartStats {
            index_requests: self.index_requests.load(Ordering::Relaxed),
            not_modified: self.not_modified.load(Ordering::Relaxed),
            downloads: self.downloads.load(Ordering::Relaxed),
        }
    }

    /// The archive of `resolved`: from disk when this digest was read
    /// before, else downloaded and checked against the digest.
    pub fn archive(
        &self,
        resolved: &Resolved,
        credentials: Option<&Credentials>,
    ) -> Result<Vec<u8>, ChartError> {
        let file = self.archive_path(resolved);
        if let Ok(bytes) = std::fs::read(&file)
            && (resolved.digest.is_empty() || digest_of(&bytes) == resolved.digest)
        {
            return Ok(bytes);
        }
        self.downloads.fetch_add(1, Ordering::Relaxed);
        let bytes = match &resolved.location {
            Location::Http { url, repository } => {
                let http = Http::new(url, credentials)?;
                // Credentials go only to the repository's own host (as
                // Helm without --pass-credentials).
                let authorization = (same_host(url, repository))
                    .then(|| auth::for_repository(credentials))
                    .flatten();
                let bytes = match http.get(url, authorization.as_deref(), &[], None) {
                    Ok(Got::Body { bytes, .. }) => bytes,
                    Ok(Got::NotModified) => Vec::new(),
                    Err(answer) => return Err(answer.into_error(url, authorization.is_some())),
                };
                let actual = digest_of(&bytes);
                if !resolved.digest.is_empty() && actual != resolved.digest {
                    return Err(ChartError::DigestMismatch {
                        url: url.clone(),
                        expected: resolved.digest.clone(),
                        actual,
                    });
                }
                bytes
            }
            Location::Oci { base, repository } => {
                let http = Http::new(base, credentials)?;
                self.registry(&http, base, credentials)
                    .blob(repository, &resolved.digest)?
            }
        };
        store(&file, &bytes);
        Ok(bytes)
    }

    /// The Helm provenance (`.prov`) of `resolved`: the file beside the
    /// archive in a Helm repository, the provenance layer in a registry.
    /// Kept in memory by the archive's digest.
    pub fn provenance(
        &self,
        resolved: &Resolved,
        credentials: Option<&Credentials>,
    ) -> Result<String, ChartError> {
        let remembered = self.lock_provenances().get(&resolved.digest).cloned();
        if let Some(text) = remembered.filter(|_| !resolved.digest.is_empty()) {
            return Ok(text);
        }
        let bytes = match &resolved.location {
            Location::Http { url, repository } => {
                let url = format!("{url}.prov");
                let http = Http::new(&url, credentials)?;
                let authorization = same_host(&url, repository)
                    .then(|| auth::for_repository(credentials))
                    .flatten();
                match http.get(&url, authorization.as_deref(), &[], None) {
                    Ok(Got::Body { bytes, .. }) => bytes,
                    Ok(Got::NotModified) => Vec::new(),
                    Err(answer) => return Err(answer.into_error(&url, authorization.is_some())),
                }
            }
            Location::Oci { base, repository } => {
                let digest = resolved
                    .provenance
                    .as_ref()
                    .ok_or_else(|| ChartError::NotFound {
                        url: format!("{base}/v2/{repository}"),
                        reason: format!(
                            "{} {} was pushed without provenance",
                            resolved.chart, resolved.version
                        ),
                    })?;
                let http = Http::new(base, credentials)?;
                self.registry(&http, base, credentials)
                    .blob(repository, digest)?
            }
        };
        let text = String::from_utf8(bytes).map_err(|_| ChartError::Invalid {
            url: resolved.url(),
            reason: "the provenance is not text".into(),
        })?;
        self.lock_provenances()
            .insert(resolved.digest.clone(), text.clone());
        Ok(text)
    }

    fn registry<'a>(
        &'a self,
        http: &'a Http,
        base: &str,
        credentials: Option<&Credentials>,
    ) -> oci::Registry<'a> {
        let host = base.split_once("://").map_or(base, |(_, host)| host);
        oci::Registry {
            http,
            base: base.to_string(),
            login: credentials.and_then(|credentials| credentials.login_for(host)),
            authorizations: &self.authorizations,
        }
    }

    fn archive_path(&self, resolved: &Resolved) -> PathBuf {
        let name = match resolved.digest.strip_prefix("sha256:") {
            Some(hex) => hex.to_string(),
            None => format!("url-{}", hex::encode(Sha256::digest(resolved.url()))),
        };
        self.dir.join(format!("{name}.tgz"))
    }

    fn lock_provenances(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.provenances.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_indexes(&self) -> std::sync::MutexGuard<'_, HashMap<String, CachedIndex>> {
        self.indexes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `sha256:` and the hex SHA-256 of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Writes `bytes` to `file` through a temporary file beside it, so a
/// reader never sees half an archive. A failure only costs a download.
fn store(file: &Path, bytes: &[u8]) {
    let Some(dir) = file.parent() else { return };
    let written = std::fs::create_dir_all(dir).and_then(|()| {
        let mut temp = tempfile::NamedTempFile::new_in(dir)?;
        std::io::Write::write_all(&mut temp, bytes)?;
        temp.persist(file).map_err(|error| error.error)?;
        Ok(())
    });
    if let Err(error) = written {
        tracing::warn!(file = %file.display(), %error, "could not keep a chart archive");
    }
}

/// Whether two URLs have the same scheme, host and port.
pub(crate) fn same_host(a: &str, b: &str) -> bool {
    let origin = |url: &str| reqwest::Url::parse(url).ok().map(|url| url.origin());
    origin(a).is_some() && origin(a) == origin(b)
}
