//! Reaching a registered cluster: a Secret's keys made into a client
//! configuration.
//!
//! A cluster is registered as a Secret labelled `tether.dev/cluster:
//! "true"` in the controller's namespace (what `tether cluster add`
//! writes), holding either
//!
//! - `server` (an `https://` URL), `token` (a bearer token, typically a
//!   ServiceAccount's) and, unless the server's certificate is signed by a
//!   public authority, `ca.crt` (PEM); or
//! - `kubeconfig` (a whole kubeconfig) and optionally `context`.
//!
//! The cluster's name is the Secret's `name` key, else the Secret's own
//! name. Nothing here ever shows a token: errors name the Secret and the
//! key.

use std::collections::BTreeMap;

use kube::Config;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The label that marks a Secret as a registered cluster.
pub const CLUSTER_LABEL: &str = "tether.dev/cluster";
/// The Secret keys.
pub const SERVER_KEY: &str = "server";
pub const TOKEN_KEY: &str = "token";
pub const CA_KEY: &str = "ca.crt";
pub const KUBECONFIG_KEY: &str = "kubeconfig";
pub const CONTEXT_KEY: &str = "context";
pub const NAME_KEY: &str = "name";

/// Why a cluster Secret cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("cluster Secret {secret}: {message}")]
    Invalid { secret: String, message: String },
    #[error("cluster {name}: {message}")]
    Lookup { name: String, message: String },
    #[error("cluster Secret {secret}: key {KUBECONFIG_KEY}: {cause}")]
    Kubeconfig {
        secret: String,
        cause: kube::config::KubeconfigError,
    },
}

/// The Secret's keys, decoded.
pub type SecretData = BTreeMap<String, Vec<u8>>;

/// A Secret's keys and their bytes.
pub fn secret_data(secret: &k8s_openapi::api::core::v1::Secret) -> SecretData {
    secret
        .data
        .iter()
        .flatten()
        .map(|(key, value)| (key.clone(), value.0.clone()))
        .collect()
}

/// The cluster `secret` registers (see [`cluster_name`]).
pub fn registered_name(secret: &k8s_openapi::api::core::v1::Secret) -> String {
    cluster_name(
        secret.metadata.name.as_deref().unwrap_or_default(),
        &secret_data(secret),
    )
}

/// A client for registered cluster `name`, found among the cluster
/// Secrets `client` may list in any namespace — the one in namespace
/// `near` first — (for the commands a person
/// runs, such as `tether diff` of an app deployed there: its dry runs go to
/// that cluster, with the credentials Tether uses there).
pub async fn client_of(
    client: &kube::Client,
    name: &str,
    near: &str,
) -> Result<kube::Client, RemoteError> {
    use k8s_openapi::api::core::v1::Secret;
    let lookup = |message: String| RemoteError::Lookup {
        name: name.to_string(),
        message,
    };
    let secrets: kube::Api<Secret> = kube::Api::all(client.clone());
    let listed = secrets
        .list(&kube::api::ListParams::default().labels(&format!("{CLUSTER_LABEL}=true")))
        .await
        .map_err(|error| {
            lookup(format!(
                "listing Secrets labelled {CLUSTER_LABEL}=true: {}",
                crate::error::describe(&error)
            ))
        })?;
    let matching: Vec<Secret> = listed
        .items
        .into_iter()
        .filter(|secret| registered_name(secret) == name)
        .collect();
    // Several controllers may each register the name: the one beside the
    // app (a controller's own namespace) wins.
    let beside: Vec<&Secret> = matching
        .iter()
        .filter(|secret| secret.metadata.namespace.as_deref() == Some(near))
        .collect();
    let chosen = match (beside.as_slice(), matching.as_slice()) {
        ([one], _) => Some(*one),
        (_, [one]) => Some(one),
        _ => None,
    };
    let Some(secret) = chosen.cloned() else {
        return Err(lookup(format!(
            "not exactly one Secret labelled {CLUSTER_LABEL}=true names it"
        )));
    };
    let secret_name = format!(
        "{}/{}",
        secret.metadata.namespace.as_deref().unwrap_or_default(),
        secret.metadata.name.as_deref().unwrap_or_default()
    );
    let config = config_of(&secret_name, &secret_data(&secret)).await?;
    kube::Client::try_from(config).map_err(|error| lookup(error.to_string()))
}

/// The name a cluster Secret registers (its `name` key, else `secret_name`).
pub fn cluster_name(secret_name: &str, data: &SecretData) -> String {
    data.get(NAME_KEY)
        .and_then(|name| std::str::from_utf8(name).ok())
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .unwrap_or(secret_name)
        .to_string()
}

/// How to reach the cluster the Secret `secret` (namespace/name) registers.
pub async fn config_of(secret: &str, data: &SecretData) -> Result<Config, RemoteError> {
    let invalid = |message: String| RemoteError::Invalid {
        secret: secret.to_string(),
        message,
    };
    let text = |key: &str| -> Result<Option<String>, RemoteError> {
        data.get(key)
            .map(|bytes| {
                String::from_utf8(bytes.clone())
                    .map(|value| value.trim().to_string())
                    .map_err(|_| invalid(format!("key {key} is not UTF-8 text")))
            })
            .transpose()
    };
    if let Some(kubeconfig) = text(KUBECONFIG_KEY)? {
        let kubeconfig_error = |cause| RemoteError::Kubeconfig {
            secret: secret.to_string(),
            cause,
        };
        let file = Kubeconfig::from_yaml(&kubeconfig).map_err(kubeconfig_error)?;
        let options = KubeConfigOptions {
            context: text(CONTEXT_KEY)?,
            ..KubeConfigOptions::default()
        };
        return Config::from_custom_kubeconfig(file, &options)
            .await
            .map_err(kubeconfig_error);
    }
    let server = text(SERVER_KEY)?.ok_or_else(|| {
        invalid(format!(
            "has neither {KUBECONFIG_KEY} nor {SERVER_KEY}: write one (see `tether cluster add`)"
        ))
    })?;
    let url: http::Uri = server.parse().map_err(|error| {
        invalid(format!(
            "key {SERVER_KEY}: {server:?} is not a URL: {error}"
        ))
    })?;
    if url.scheme_str() != Some("https") {
        return Err(invalid(format!(
            "key {SERVER_KEY}: {server} is not an https:// URL; a cluster is reached over TLS only"
        )));
    }
    let token = text(TOKEN_KEY)?
        .filter(|token| !token.is_empty())
        .ok_or_else(|| invalid(format!("has {SERVER_KEY} but no {TOKEN_KEY}")))?;
    let mut config = Config::new(url);
    config.auth_info.token = Some(token.into());
    if let Some(ca) = text(CA_KEY)? {
        let ders =
            pem_certificates(&ca).map_err(|message| invalid(format!("key {CA_KEY}: {message}")))?;
        config.root_cert = Some(ders);
    }
    Ok(config)
}

/// DER certificates as one PEM bundle.
pub fn pem(certificates: &[Vec<u8>]) -> String {
    use base64::Engine;
    let mut pem = String::new();
    for der in certificates {
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        let encoded = base64::engine::general_purpose::STANDARD.encode(der);
        for line in encoded.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    pem
}

/// The DER bytes of each certificate in a PEM bundle.
fn pem_certificates(pem: &str) -> Result<Vec<Vec<u8>>, String> {
    use base64::Engine;
    let mut certificates = Vec::new();
    let mut inside: Option<String> = None;
    for line in pem.lines().map(str::trim) {
        match (line, inside.as_mut()) {
            ("-----BEGIN CERTIFICATE-----", None) => inside = Some(String::new()),
            ("-----END CERTIFICATE-----", Some(body)) => {
                let der = base64::engine::general_purpose::STANDARD
                    .decode(body.as_bytes())
                    .map_err(|error| format!("a certificate is not base64: {error}"))?;
                certificates.push(der);
                inside = None;
            }
            (line, Some(body)) => body.push_str(line),
            _ => {}
        }
    }
    if inside.is_some() {
        return Err("a certificate has no END line".into());
    }
    if certificates.is_empty() {
        return Err("no PEM certificate (-----BEGIN CERTIFICATE-----)".into());
    }
    Ok(certificates)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> SecretData {
        pairs
            .iter()
            .map(|(key, value)| (key.to_string(), value.as_bytes().to_vec()))
            .collect()
    }

    /// Why a cluster Secret named `secret` holding `pairs` is refused.
    async fn refusal(secret: &str, pairs: &[(&str, &str)]) -> String {
        config_of(secret, &data(pairs))
            .await
            .unwrap_err()
            .to_string()
    }

    #[tokio::test]
    async fn a_server_and_token_make_a_config_that_carries_the_token() {
        let config = config_of(
            "tether-system/prod",
            &data(&[("server", "https://127.0.0.1:6443"), ("token", "t0ken")]),
        )
        .await
        .unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert!(config.auth_info.token.is_some());
    }

    #[tokio::test]
    async fn plain_http_is_refused_naming_the_secret_and_key() {
        let error = refusal(
            "tether-system/prod",
            &[("server", "http://127.0.0.1:8080"), ("token", "t0ken")],
        )
        .await;
        assert!(
            error.starts_with("cluster Secret tether-system/prod: key server"),
            "{error}"
        );
        assert!(!error.contains("t0ken"), "{error}");
    }

    #[tokio::test]
    async fn a_secret_with_neither_server_nor_kubeconfig_says_what_to_write() {
        let error = refusal("ns/x", &[("token", "secret-value")]).await;
        assert!(error.contains("neither kubeconfig nor server"), "{error}");
        assert!(!error.contains("secret-value"), "{error}");
    }

    #[tokio::test]
    async fn a_ca_that_is_not_pem_is_refused() {
        let error = refusal(
            "ns/x",
            &[
                ("server", "https://127.0.0.1:6443"),
                ("token", "t"),
                ("ca.crt", "not a certificate"),
            ],
        )
        .await;
        assert!(error.contains("key ca.crt: no PEM certificate"), "{error}");
    }

    #[test]
    fn certificates_go_to_pem_and_back() {
        let ders = vec![vec![7u8; 100], vec![9u8; 3]];
        let bundle = pem(&ders);
        assert!(
            bundle
                .lines()
                .all(|line| line.len() <= 64 || line.starts_with("-----"))
        );
        assert_eq!(pem_certificates(&bundle).unwrap(), ders);
    }

    #[test]
    fn the_name_key_names_the_cluster_else_the_secret_does() {
        assert_eq!(
            cluster_name("cluster-prod", &data(&[("name", "prod")])),
            "prod"
        );
        assert_eq!(cluster_name("cluster-prod", &data(&[])), "cluster-prod");
    }
}
