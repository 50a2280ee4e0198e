//! One notification request, built and not sent (so it is tested without
//! a socket): the body in the route's format, the headers every request
//! carries, and the route's credentials — a bearer token, or an
//! HMAC-SHA256 signature of the body as GitHub signs its webhooks.

use hmac::{Hmac, Mac};
use reqwest::Url;
use sha2::Sha256;
use tether_core::notice::Notice;

use super::payload;
use super::route::{AuthKind, Route};

/// The header carrying the notice's key; a receiver de-duplicates on it
/// (a retried request carries the same).
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";
/// The header carrying the event word (`sync-failed`).
pub const EVENT: &str = "X-Tether-Event";
/// The header carrying `sha256=<hex>` for routes with `auth: hmac`.
pub const SIGNATURE: &str = "X-Tether-Signature";

/// A Secret's value. It prints as `<redacted>`, so no log or error shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(Vec<u8>);

impl SecretValue {
    /// `bytes` without surrounding whitespace (a file's trailing newline
    /// is not part of a token).
    pub fn new(bytes: &[u8]) -> SecretValue {
        SecretValue(bytes.trim_ascii().to_vec())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value itself, to put in a request (a URL kept in a Secret).
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A request ready to send. Its `Debug` leaves out header values.
pub struct Outgoing {
    pub url: Url,
    /// Name and value; a value marked `true` is a credential (sent, marked
    /// sensitive, never shown).
    pub headers: Vec<(&'static str, String, bool)>,
    pub body: Vec<u8>,
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outgoing")
            .field("url", &super::route::shown(&self.url))
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, ..)| name)
                    .collect::<Vec<_>>(),
            )
            .field("body", &String::from_utf8_lossy(&self.body))
            .finish()
    }
}

/// The request for `notice` on `route`, to `url`, with `secret` the value
/// of the route's `secretRef` (if it has auth).
pub fn build(route: &Route, url: Url, notice: &Notice, secret: Option<&SecretValue>) -> Outgoing {
    let body = payload::body(route.format, notice);
    let mut headers = vec![
        ("Content-Type", "application/json".to_string(), false),
        (
            "User-Agent",
            format!("tether/{}", env!("CARGO_PKG_VERSION")),
            false,
        ),
        (IDEMPOTENCY_KEY, notice.key.clone(), false),
        (EVENT, notice.kind.to_string(), false),
    ];
    if let (Some(auth), Some(secret)) = (&route.auth, secret) {
        headers.push(match auth.kind {
            AuthKind::Bearer => (
                "Authorization",
                format!("Bearer {}", String::from_utf8_lossy(&secret.0)),
                true,
            ),
            AuthKind::Hmac => (SIGNATURE, signature(secret, &body), false),
        });
    }
    Outgoing { url, headers, body }
}

/// `sha256=` and the hex HMAC-SHA256 of `body` under `key`.
///
/// ```
/// use tether_controller::notify::request::{SecretValue, signature};
/// // RFC 4231 test case 2.
/// let key = SecretValue::new(b"Jefe");
/// assert_eq!(
///     signature(&key, b"what do ya want for nothing?"),
///     "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
/// );
/// ```
pub fn signature(key: &SecretValue, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(&key.0).expect("HMAC takes a key of any size");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use tether_core::notice::{NoticeKind, Severity};

    use super::*;
    use crate::notify::route;

    const TOKEN: &str = "s3cr3t-t0ken-value";

    fn notice() -> Notice {
        Notice {
            kind: NoticeKind::BreakGlassOpened,
            severity: Severity::Warning,
            namespace: "shop".into(),
            name: "web".into(),
            labels: Default::default(),
            message: "BreakGlass shop/hotfix opened by alice for 1h".into(),
            revision: None,
            state: None,
            previous_state: None,
            at: "2025-01-01T00:00:00Z".into(),
            key: "uid/break-glass-opened/hotfix".into(),
        }
    }

    fn route(format: &str, auth: &str) -> Route {
        let text = format!(
            "- name: r\n  url: https://hooks.example.com/x\n  events: ['*']\n  format: {format}\n  auth: {auth}\n  secretRef: {{name: s, key: k}}\n"
        );
        let (mut routes, errors) = route::parse("test", &text, &mut HashSet::new());
        assert!(errors.is_empty(), "{errors:?}");
        routes.remove(0)
    }

    fn header<'a>(outgoing: &'a Outgoing, name: &str) -> Option<&'a str> {
        outgoing
            .headers
            .iter()
            .find(|(n, ..)| *n == name)
            .map(|(_, v, _)| v.as_str())
    }

    fn send(route: &Route) -> Outgoing {
        let url = Url::parse("https://hooks.example.com/x").unwrap();
        build(
            route,
            url,
            &notice(),
            Some(&SecretValue::new(TOKEN.as_bytes())),
        )
    }

    #[test]
    fn every_request_carries_the_idempotency_key_and_the_event() {
        let outgoing = send(&route("json", "bearer"));
        assert_eq!(
            header(&outgoing, IDEMPOTENCY_KEY),
            Some("uid/break-glass-opened/hotfix")
        );
        assert_eq!(header(&outgoing, EVENT), Some("break-glass-opened"));
        assert_eq!(header(&outgoing, "Content-Type"), Some("application/json"));
    }

    #[test]
    fn bearer_auth_is_a_sensitive_authorization_header() {
        let outgoing = send(&route("json", "bearer"));
        let (_, value, sensitive) = outgoing
            .headers
            .iter()
            .find(|(n, ..)| *n == "Authorization")
            .unwrap();
        assert_eq!(value, &format!("Bearer {TOKEN}"));
        assert!(sensitive);
        assert_eq!(header(&outgoing, SIGNATURE), None);
    }

    #[test]
    fn hmac_auth_signs_exactly_the_body() {
        let outgoing = send(&route("slack", "hmac"));
        let mut mac = Hmac::<Sha256>::new_from_slice(TOKEN.as_bytes()).unwrap();
        mac.update(&outgoing.body);
        mac.verify_slice(
            &hex::decode(
                header(&outgoing, SIGNATURE)
                    .unwrap()
                    .strip_prefix("sha256=")
                    .unwrap(),
            )
            .unwrap(),
        )
        .expect("the signature verifies");
        assert_eq!(header(&outgoing, "Authorization"), None);
    }

    #[test]
    fn no_secret_value_appears_in_any_payload_or_debug_output() {
        for format in ["json", "slack"] {
            for auth in ["bearer", "hmac"] {
                let outgoing = send(&route(format, auth));
                let body = String::from_utf8(outgoing.body.clone()).unwrap();
                assert!(!body.contains(TOKEN), "{format}/{auth}: {body}");
                assert!(!format!("{outgoing:?}").contains(TOKEN), "{format}/{auth}");
            }
        }
        let secret = SecretValue::new(format!("{TOKEN}\n").as_bytes());
        assert_eq!(format!("{secret:?}"), "<redacted>");
        assert_eq!(secret, SecretValue::new(TOKEN.as_bytes()));
    }
}
