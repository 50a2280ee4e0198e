//! Credentials for reaching a repository. They are values (read from a
//! Kubernetes Secret's `data` by the controller, or from a local file by the
//! CLI) and never appear in logs, errors or `Debug` output.

use std::collections::BTreeMap;
use std::fmt;

/// A secret string that prints as `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret itself; only for handing it to the transport.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How to authenticate to a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// HTTP basic authentication; a token goes in `password`. `ca_cert`
    /// (PEM) is the only certificate authority trusted for an `https://`
    /// server when set, as `git`'s `http.sslCAInfo`.
    Http {
        username: String,
        password: Secret,
        ca_cert: Option<String>,
        /// `token` given without `username`: a Helm repository gets it as
        /// `Authorization: Bearer`; Git, which has no bearer scheme, as the
        /// password of user `git`.
        bearer: bool,
        /// A client certificate for mutual TLS (Helm repositories).
        client_cert: Option<ClientCert>,
    },
    /// Registry logins per host, from a `kubernetes.io/dockerconfigjson`
    /// Secret's `.dockerconfigjson` (OCI registries), and optionally the
    /// only CA to trust.
    Registry {
        logins: BTreeMap<String, Login>,
        ca_cert: Option<String>,
    },
    /// An SSH private key (OpenSSH format) and the `known_hosts` lines that
    /// the server's host key must match.
    Ssh {
        private_key: Secret,
        known_hosts: String,
    },
}

/// A client certificate and its private key, PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    pub cert: String,
    pub key: Secret,
}

/// A user name and password for one registry host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Login {
    pub username: String,
    pub password: Secret,
}

/// Why credentials could not be read. Never retryable.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error(
        "credentials need `password` (or `token`) for HTTP, or `sshPrivateKey` and `knownHosts` for SSH; found keys: {0}"
    )]
    Incomplete(String),
    #[error("credential {0:?} is not UTF-8")]
    NotUtf8(String),
    #[error("credential {key:?}: {reason}")]
    Malformed { key: String, reason: String },
}

impl Credentials {
    /// Reads credentials from a Secret's `data` (already base64-decoded) or
    /// from a `key: value` file: `username` + `password` or `token` (and
    /// optionally `caCert`) for HTTP; `sshPrivateKey` + `knownHosts` for SSH;
    /// `.dockerconfigjson` for OCI registries. Helm repositories also take
    /// a client certificate (`tls.crt` + `tls.key`, or Argo CD's
    /// `tlsClientCertData` + `tlsClientCertKey`), alone or with the others,
    /// and `caCert` (or `ca.crt`) alone.
    pub fn from_data(data: &BTreeMap<String, Vec<u8>>) -> Result<Credentials, CredentialsError> {
        let text = |key: &str| -> Result<Option<String>, CredentialsError> {
            data.get(key)
                .map(|bytes| {
                    String::from_utf8(bytes.clone())
                        .map_err(|_| CredentialsError::NotUtf8(key.to_string()))
                })
                .transpose()
        };
        if let Some(private_key) = text("sshPrivateKey")? {
            let known_hosts = text("knownHosts")?.ok_or_else(|| incomplete(data))?;
            return Ok(Credentials::Ssh {
                private_key: Secret::new(private_key),
                known_hosts,
            });
        }
        let ca_cert = match text("caCert")? {
            Some(ca) => Some(ca),
            None => text("ca.crt")?,
        };
        if let Some(config) = text(".dockerconfigjson")? {
            return Ok(Credentials::Registry {
                logins: docker_logins(&config)?,
                ca_cert,
            });
        }
        let client_cert = match (
            text("tls.crt")?.or(text("tlsClientCertData")?),
            text("tls.key")?.or(text("tlsClientCertKey")?),
        ) {
            (Some(cert), Some(key)) => Some(ClientCert {
                cert,
                key: Secret::new(key),
            }),
            _ => None,
        };
        let username = text("username")?;
        let (password, bearer) = match (text("password")?, text("token")?) {
            (Some(password), _) => (password, false),
            (None, Some(token)) => (token, username.is_none()),
            (None, None) if client_cert.is_some() || ca_cert.is_some() => (String::new(), false),
            (None, None) => return Err(incomplete(data)),
        };
        Ok(Credentials::Http {
            username: username.unwrap_or_else(|| "git".into()),
            password: Secret::new(password),
            ca_cert,
            bearer,
            client_cert,
        })
    }

    /// The login for registry `host` (`host` or `host:port`), if any.
    pub fn login_for(&self, host: &str) -> Option<Login> {
        match self {
            Credentials::Registry { logins, .. } => logins.get(host).cloned(),
            Credentials::Http {
                username,
                password,
                bearer: false,
                ..
            } if !password.expose().is_empty() => Some(Login {
                username: username.clone(),
                password: password.clone(),
            }),
            _ => None,
        }
    }

    /// The only CA certificate (PEM) to trust, if set.
    pub fn ca_cert(&self) -> Option<&str> {
        match self {
            Credentials::Http { ca_cert, .. } | Credentials::Registry { ca_cert, .. } => {
                ca_cert.as_deref()
            }
            Credentials::Ssh { .. } => None,
        }
    }

    /// Reads a credentials file: YAML or JSON mapping of the same keys as
    /// [`Credentials::from_data`].
    pub fn from_file_text(text: &str) -> Result<Credentials, CredentialsError> {
        let map: BTreeMap<String, String> =
            serde_saphyr::from_str(text).map_err(|_| CredentialsError::Incomplete("?".into()))?;
        let data = map
            .into_iter()
            .map(|(key, value)| (key, value.into_bytes()))
            .collect();
        Credentials::from_data(&data)
    }
}

/// The logins of a docker config (`{"auths": {HOST: {"auth": base64(user:password)}
/// | {"username", "password"}}}`), keyed by host without a scheme.
fn docker_logins(config: &str) -> Result<BTreeMap<String, Login>, CredentialsError> {
    use base64::Engine;
    let malformed = |reason: &str| CredentialsError::Malformed {
        key: ".dockerconfigjson".into(),
        reason: reason.into(),
    };
    #[derive(serde::Deserialize)]
    struct Config {
        #[serde(default)]
        auths: BTreeMap<String, Auth>,
    }
    #[derive(serde::Deserialize)]
    struct Auth {
        #[serde(default)]
        auth: Option<String>,
        #[serde(default)]
        username: Option<String>,
        #[serde(default)]
        password: Option<String>,
    }
    let config: Config = serde_json::from_str(config)
        .map_err(|_| malformed("not a docker config (JSON with `auths`)"))?;
    let mut logins = BTreeMap::new();
    for (server, auth) in config.auths {
        let (username, password) = match (auth.username, auth.password, auth.auth) {
            (Some(username), Some(password), _) => (username, password),
            (_, _, Some(encoded)) => {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(encoded.trim())
                    .ok()
                    .and_then(|bytes| String::from_utf8(bytes).ok())
                    .ok_or_else(|| malformed("an `auth` is not base64 of user:password"))?;
                let (username, password) = decoded
                    .split_once(':')
                    .ok_or_else(|| malformed("an `auth` is not base64 of user:password"))?;
                (username.to_string(), password.to_string())
            }
            _ => continue,
        };
        let host = server
            .split_once("://")
            .map_or(server.as_str(), |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string();
        logins.insert(
            host,
            Login {
                username,
                password: Secret::new(password),
            },
        );
    }
    Ok(logins)
}

fn incomplete(data: &BTreeMap<String, Vec<u8>>) -> CredentialsError {
    CredentialsError::Incomplete(data.keys().cloned().collect::<Vec<_>>().join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_in_debug_output() {
        let data = BTreeMap::from([
            ("username".to_string(), b"bot".to_vec()),
            ("token".to_string(), b"hunter2-token".to_vec()),
        ]);
        let credentials = Credentials::from_data(&data).unwrap();
        let printed = format!("{credentials:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("<redacted>"));
        let ssh = Credentials::from_file_text(
            "sshPrivateKey: \"-----BEGIN OPENSSH PRIVATE KEY-----\"\nknownHosts: host ssh-ed25519 AAAA\n",
        )
        .unwrap();
        assert!(!format!("{ssh:?}").contains("OPENSSH"));
    }

    #[test]
    fn a_docker_config_gives_a_login_per_registry_host_and_no_value_in_debug() {
        let config = r#"{"auths": {"https://127.0.0.1:5000/v2/": {"auth": "Ym90Omh1bnRlcjI="},
            "ghcr.io": {"username": "me", "password": "pat-hunter2"}}}"#;
        let data = BTreeMap::from([(".dockerconfigjson".to_string(), config.as_bytes().to_vec())]);
        let credentials = Credentials::from_data(&data).unwrap();
        let login = credentials.login_for("127.0.0.1:5000").unwrap();
        assert_eq!(
            (login.username.as_str(), login.password.expose()),
            ("bot", "hunter2")
        );
        assert_eq!(credentials.login_for("ghcr.io").unwrap().username, "me");
        assert!(credentials.login_for("quay.io").is_none());
        assert!(!format!("{credentials:?}").contains("hunter2"));
    }

    #[test]
    fn a_token_alone_is_a_bearer_token_and_a_certificate_alone_is_enough() {
        let data = BTreeMap::from([("token".to_string(), b"t0ken".to_vec())]);
        let Credentials::Http {
            bearer, username, ..
        } = Credentials::from_data(&data).unwrap()
        else {
            panic!()
        };
        assert!(bearer);
        assert_eq!(username, "git", "Git still sends it as user git's password");
        let data = BTreeMap::from([
            ("tls.crt".to_string(), b"CERT".to_vec()),
            ("tls.key".to_string(), b"KEY".to_vec()),
        ]);
        let Credentials::Http { client_cert, .. } = Credentials::from_data(&data).unwrap() else {
            panic!()
        };
        assert_eq!(client_cert.unwrap().cert, "CERT");
    }

    #[test]
    fn incomplete_credentials_name_the_keys_found_but_no_values() {
        let data = BTreeMap::from([("username".to_string(), b"secret-user".to_vec())]);
        let error = Credentials::from_data(&data).unwrap_err().to_string();
        assert!(error.contains("found keys: username"), "{error}");
        assert!(!error.contains("secret-user"));
    }
}
