//! The `Authorization` a chart source sends: for a Helm repository, basic
//! or bearer from its Secret, up front (as `helm` does); for an OCI
//! registry, whatever its `WWW-Authenticate` challenge asks for (basic, or
//! a bearer token from the registry's token service).

use std::collections::BTreeMap;

use base64::Engine;

use crate::credentials::{Credentials, Login};

/// The header value for a Helm repository read with `credentials`.
pub fn for_repository(credentials: Option<&Credentials>) -> Option<String> {
    match credentials? {
        Credentials::Http {
            password,
            bearer: true,
            ..
        } => Some(format!("Bearer {}", password.expose())),
        Credentials::Http {
            username, password, ..
        } if !password.expose().is_empty() => Some(basic(username, password.expose())),
        _ => None,
    }
}

/// `Basic base64(username:password)`.
pub fn basic(username: &str, password: &str) -> String {
    let encoded =
        base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
    format!("Basic {encoded}")
}

/// `Basic` of a registry login.
pub fn basic_login(login: &Login) -> String {
    basic(&login.username, login.password.expose())
}

/// A parsed `WWW-Authenticate` challenge: its scheme (lower case) and
/// parameters (`realm`, `service`, `scope`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub scheme: String,
    pub params: BTreeMap<String, String>,
}

impl Challenge {
    /// Parses `Scheme key="value", key=value`; `None` without a scheme.
    pub fn parse(header: &str) -> Option<Challenge> {
        let header = header.trim();
        let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
        if scheme.is_empty() {
            return None;
        }
        let mut params = BTreeMap::new();
        let mut rest = rest.trim();
        while !rest.is_empty() {
            let Some((key, after)) = rest.split_once('=') else {
                break;
            };
            let key = key
                .trim()
                .trim_start_matches(',')
                .trim()
                .to_ascii_lowercase();
            let after = after.trim_start();
            let (value, remainder) = match after.strip_prefix('"') {
                Some(quoted) => {
                    let end = quoted.find('"').unwrap_or(quoted.len());
                    (&quoted[..end], quoted.get(end + 1..).unwrap_or_default())
                }
                None => {
                    let end = after.find(',').unwrap_or(after.len());
                    (&after[..end], &after[end..])
                }
            };
            params.insert(key, value.to_string());
            rest = remainder.trim_start().trim_start_matches(',').trim_start();
        }
        Some(Challenge {
            scheme: scheme.to_ascii_lowercase(),
            params,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_bearer_challenge_gives_realm_service_and_scope() {
        let challenge = Challenge::parse(
            r#"Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:charts/web:pull""#,
        )
        .unwrap();
        assert_eq!(challenge.scheme, "bearer");
        assert_eq!(challenge.params["realm"], "https://auth.example.com/token");
        assert_eq!(challenge.params["service"], "registry.example.com");
        assert_eq!(challenge.params["scope"], "repository:charts/web:pull");
        let basic = Challenge::parse(r#"Basic realm="Registry Realm""#).unwrap();
        assert_eq!(basic.scheme, "basic");
        assert_eq!(basic.params["realm"], "Registry Realm");
    }

    #[test]
    fn a_repository_gets_basic_auth_or_a_bearer_token() {
        use std::collections::BTreeMap;
        let from = |pairs: &[(&str, &str)]| {
            let data: BTreeMap<String, Vec<u8>> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                .collect();
            Credentials::from_data(&data).unwrap()
        };
        let user = from(&[("username", "bot"), ("password", "pw")]);
        assert_eq!(for_repository(Some(&user)).unwrap(), "Basic Ym90OnB3");
        let token = from(&[("token", "t0k")]);
        assert_eq!(for_repository(Some(&token)).unwrap(), "Bearer t0k");
        let ca_only = from(&[("caCert", "PEM")]);
        assert_eq!(for_repository(Some(&ca_only)), None);
    }
}
