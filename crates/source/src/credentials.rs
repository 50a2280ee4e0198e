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
    },
    /// An SSH private key (OpenSSH format) and the `known_hosts` lines that
    /// the server's host key must match.
    Ssh {
        private_key: Secret,
        known_hosts: String,
    },
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
}

impl Credentials {
    /// Reads credentials from a Secret's `data` (already base64-decoded) or
    /// from a `key: value` file: `username` + `password` or `token` (and
    /// optionally `caCert`) for HTTP; `sshPrivateKey` + `knownHosts` for SSH.
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
        let password = match text("password")? {
            Some(password) => password,
            None => text("token")?.ok_or_else(|| incomplete(data))?,
        };
        Ok(Credentials::Http {
            username: text("username")?.unwrap_or_else(|| "git".into()),
            password: Secret::new(password),
            ca_cert: text("caCert")?,
        })
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
    fn incomplete_credentials_name_the_keys_found_but_no_values() {
        let data = BTreeMap::from([("username".to_string(), b"secret-user".to_vec())]);
        let error = Credentials::from_data(&data).unwrap_err().to_string();
        assert!(error.contains("found keys: username"), "{error}");
        assert!(!error.contains("secret-user"));
    }
}
