//! Charts in OCI registries, over the distribution API (`/v2/…`): tags,
//! manifests and blobs, with the registry's own authentication (a basic
//! login, or a bearer token from the token service its challenge names).
//!
//! A Helm chart is an image manifest whose one layer has the media type
//! [`CHART_LAYER`]; Helm writes `+` in versions as `_` in tags.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::ChartError;
use super::auth::{Challenge, basic_login};
use super::http::{Answer, Got, Http};
use crate::credentials::Login;

/// The media type of a Helm chart's content layer.
pub const CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
/// The media type of a Helm chart's provenance layer (`helm push` of a
/// chart packaged with `--sign`).
pub const PROVENANCE_LAYER: &str = "application/vnd.cncf.helm.chart.provenance.v1.prov";
/// The media type of a Flux artifact's content layer (`flux push artifact`).
pub const FLUX_LAYER: &str = "application/vnd.cncf.flux.content.v1.tar+gzip";
const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// `oci://host[:port]/path`, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host` or `host:port`.
    pub registry: String,
    /// The repository path inside the registry (`charts/web`).
    pub repository: String,
}

impl Reference {
    /// Parses `oci://registry/path` and appends `name` (a chart's) when
    /// given.
    pub fn parse(url: &str, name: &str) -> Result<Reference, String> {
        let rest = url
            .strip_prefix("oci://")
            .ok_or_else(|| format!("{url}: an OCI reference starts with oci://"))?;
        let (registry, path) = rest.split_once('/').unwrap_or((rest, ""));
        let path = path.trim_matches('/');
        let repository = match (path.is_empty(), name.is_empty()) {
            (true, true) => return Err(format!("{url}: no repository after the registry")),
            (true, false) => name.to_string(),
            (false, true) => path.to_string(),
            (false, false) => format!("{path}/{name}"),
        };
        // The distribution spec's path component: lower-case alphanumerics
        // joined by separators, never starting or ending with one.
        let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        let valid = |part: &str| {
            part.starts_with(alphanumeric)
                && part.ends_with(alphanumeric)
                && part.chars().all(|c| alphanumeric(c) || "._-".contains(c))
        };
        if registry.is_empty() || !repository.split('/').all(valid) {
            return Err(format!(
                "{url}: not a registry and repository (lower-case letters, digits, . _ - and /)"
            ));
        }
        Ok(Reference {
            registry: registry.to_string(),
            repository,
        })
    }
}

/// An image manifest's parts Tether reads.
#[derive(Debug, Deserialize)]
pub struct Manifest {
    #[serde(default)]
    pub layers: Vec<Descriptor>,
    #[serde(default)]
    pub annotations: HashMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    #[serde(default)]
    pub size: u64,
}

/// One registry, read with one login: remembers the `Authorization` that
/// worked per repository so the next request sends it at once.
pub(crate) struct Registry<'a> {
    pub http: &'a Http,
    /// `https://host[:port]` (or `http://` when insecure).
    pub base: String,
    pub login: Option<Login>,
    pub authorizations: &'a Mutex<HashMap<String, String>>,
}

impl Registry<'_> {
    /// The repository's tags.
    pub fn tags(&self, repository: &str) -> Result<Vec<String>, ChartError> {
        #[derive(Deserialize)]
        struct Tags {
            #[serde(default)]
            tags: Option<Vec<String>>,
        }
        let url = format!("{}/v2/{repository}/tags/list", self.base);
        let bytes = self.get(repository, &url, &["application/json"])?;
        let tags: Tags = serde_json::from_slice(&bytes).map_err(|error| ChartError::Invalid {
            url,
            reason: format!("the tag list does not parse: {error}"),
        })?;
        Ok(tags.tags.unwrap_or_default())
    }

    /// The manifest `reference` (a tag or a digest) points at, and its
    /// digest. A digest reference is checked against the bytes received.
    pub fn manifest(
        &self,
        repository: &str,
        reference: &str,
    ) -> Result<(Manifest, String), ChartError> {
        let url = format!("{}/v2/{repository}/manifests/{reference}", self.base);
        let bytes = self.get(repository, &url, &[MANIFEST, DOCKER_MANIFEST])?;
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        if reference.starts_with("sha256:") && reference != digest {
            return Err(ChartError::DigestMismatch {
                url,
                expected: reference.to_string(),
                actual: digest,
            });
        }
        let manifest = serde_json::from_slice(&bytes).map_err(|error| ChartError::Invalid {
            url,
            reason: format!("the manifest does not parse: {error}"),
        })?;
        Ok((manifest, digest))
    }

    /// The blob `digest`, checked against it.
    pub fn blob(&self, repository: &str, digest: &str) -> Result<Vec<u8>, ChartError> {
        let url = format!("{}/v2/{repository}/blobs/{digest}", self.base);
        let bytes = self.get(repository, &url, &[])?;
        let actual = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        if actual != digest {
            return Err(ChartError::DigestMismatch {
                url,
                expected: digest.to_string(),
                actual,
            });
        }
        Ok(bytes)
    }

    /// GETs `url`, answering one authentication challenge.
    fn get(&self, repository: &str, url: &str, accept: &[&str]) -> Result<Vec<u8>, ChartError> {
        let key = format!("{} {repository}", self.base);
        let remembered = self.lock().get(&key).cloned();
        let challenge = match self.http.get(url, remembered.as_deref(), accept, None) {
            Ok(got) => return Ok(body(got)),
            Err(Answer::Unauthorized { challenge }) => challenge,
            Err(Answer::Failed(error)) => return Err(error),
        };
        let refused = |reason: String| ChartError::Unauthorized {
            url: url.to_string(),
            reason,
        };
        let challenge = Challenge::parse(&challenge)
            .ok_or_else(|| refused("401 Unauthorized without a challenge".into()))?;
        let authorization = match challenge.scheme.as_str() {
            "basic" => basic_login(self.login.as_ref().ok_or_else(|| {
                refused("401 Unauthorized: the registry wants a login (spec.source.secretRef with .dockerconfigjson)".into())
            })?),
            "bearer" => format!("Bearer {}", self.token(&challenge, repository)?),
            other => return Err(refused(format!("unsupported authentication scheme {other:?}"))),
        };
        match self.http.get(url, Some(&authorization), accept, None) {
            Ok(got) => {
                self.lock().insert(key, authorization);
                Ok(body(got))
            }
            Err(answer) => Err(answer.into_error(url, self.login.is_some())),
        }
    }

    /// A bearer token from the token service `challenge` names, asked with
    /// the login (or anonymously).
    fn token(&self, challenge: &Challenge, repository: &str) -> Result<String, ChartError> {
        #[derive(Deserialize)]
        struct Token {
            #[serde(default)]
            token: Option<String>,
            #[serde(default)]
            access_token: Option<String>,
        }
        let realm = challenge
            .params
            .get("realm")
            .ok_or_else(|| ChartError::Unauthorized {
                url: self.base.clone(),
                reason: "a bearer challenge without a realm".into(),
            })?;
        let scope = challenge
            .params
            .get("scope")
            .cloned()
            .unwrap_or_else(|| format!("repository:{repository}:pull"));
        let mut url = reqwest::Url::parse(realm).map_err(|error| ChartError::Invalid {
            url: realm.clone(),
            reason: format!("token realm: {error}"),
        })?;
        url.query_pairs_mut().append_pair("scope", &scope);
        if let Some(service) = challenge.params.get("service") {
            url.query_pairs_mut().append_pair("service", service);
        }
        let url = url.to_string();
        let authorization = self.login.as_ref().map(basic_login);
        let got = self
            .http
            .get(&url, authorization.as_deref(), &["application/json"], None)
            .map_err(|answer| answer.into_error(&url, self.login.is_some()))?;
        let token: Token =
            serde_json::from_slice(&body(got)).map_err(|_| ChartError::Unauthorized {
                url: url.clone(),
                reason: "the token service's answer holds no token".into(),
            })?;
        token
            .token
            .or(token.access_token)
            .ok_or_else(|| ChartError::Unauthorized {
                url,
                reason: "the token service's answer holds no token".into(),
            })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.authorizations
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

fn body(got: Got) -> Vec<u8> {
    match got {
        Got::Body { bytes, .. } => bytes,
        Got::NotModified => Vec::new(),
    }
}

/// The tag Helm pushes version `version` under (`+` is not allowed in tags).
pub fn tag_of(version: &str) -> String {
    version.replace('+', "_")
}

/// The version a tag stands for.
pub fn version_of(tag: &str) -> String {
    tag.replace('_', "+")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oci_url_splits_into_registry_and_repository_with_the_chart_appended() {
        let reference = Reference::parse("oci://127.0.0.1:5000/charts", "web").unwrap();
        assert_eq!(reference.registry, "127.0.0.1:5000");
        assert_eq!(reference.repository, "charts/web");
        let bare = Reference::parse("oci://ghcr.io/acme/manifests/shop", "").unwrap();
        assert_eq!(bare.repository, "acme/manifests/shop");
        assert!(Reference::parse("https://ghcr.io/acme", "web").is_err());
        assert!(Reference::parse("oci://ghcr.io/Acme", "web").is_err());
        assert!(Reference::parse("oci://ghcr.io/../x", "web").is_err());
    }

    #[test]
    fn build_metadata_travels_as_an_underscore_in_tags() {
        assert_eq!(tag_of("1.2.3+build.7"), "1.2.3_build.7");
        assert_eq!(version_of("1.2.3_build.7"), "1.2.3+build.7");
    }
}
