//! Routes: where notifications go, which of them, about which
//! Applications, in which format and with which credentials — read from
//! `tether run --notify-webhook URL` and from the data of the ConfigMap
//! [`super::ROUTES_CONFIGMAP`] (format in the module doc of
//! [`super`]). Parsing is pure; a malformed route is an error that names
//! its origin (ConfigMap, key, line) and the route, and leaves the other
//! routes alone.

use std::collections::{BTreeSet, HashSet};

use reqwest::Url;
use serde::Deserialize;
use serde_json::Value;
use tether_core::notice::{Notice, NoticeKind};
use tether_core::vocabulary::{UnknownWord, Vocabulary};

use super::selector::{AppSelector, SelectorProblem};

tether_core::vocabulary! {
    /// A route's payload format.
    pub enum Format("payload format") {
        /// The documented JSON schema ([`super::payload::json`]).
        Json = "json",
        /// Slack-compatible `text` and `blocks` ([`super::payload::slack`]).
        Slack = "slack",
    }
}

tether_core::vocabulary! {
    /// How a request proves it comes from Tether.
    pub enum AuthKind("route auth") {
        /// `Authorization: Bearer <secret>`.
        Bearer = "bearer",
        /// `X-Tether-Signature: sha256=<hex HMAC-SHA256 of the body>`.
        Hmac = "hmac",
    }
}

/// A key of a Secret in the controller's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    pub name: String,
    pub key: String,
}

/// The events a route subscribes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Events {
    /// `"*"`: every kind, including kinds added later.
    All,
    Only(BTreeSet<NoticeKind>),
}

/// Where a route's requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Url(Url),
    /// The URL is itself a credential (a Slack incoming webhook's is), so
    /// it is kept in a Secret and read when sending.
    Secret(SecretRef),
}

/// A route's credentials: how they are used, and where the value is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Auth {
    pub kind: AuthKind,
    pub secret: SecretRef,
}

/// One route, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Unique among all routes; logs name a route by it.
    pub name: String,
    pub target: Target,
    pub events: Events,
    pub selector: AppSelector,
    pub format: Format,
    pub auth: Option<Auth>,
}

impl Route {
    /// The route of the `index`th (from 1) `--notify-webhook URL`: every
    /// event of every Application, as JSON, unauthenticated.
    pub fn webhook(index: usize, url: &str) -> Result<Route, RouteError> {
        let name = format!("notify-webhook-{index}");
        let url = http_url(url).map_err(|problem| RouteError::Flag {
            route: name.clone(),
            problem,
        })?;
        Ok(Route {
            name,
            target: Target::Url(url),
            events: Events::All,
            selector: AppSelector::default(),
            format: Format::Json,
            auth: None,
        })
    }

    /// Whether this route wants `notice`: its kind is subscribed and its
    /// Application selected.
    pub fn wants(&self, notice: &Notice) -> bool {
        let subscribed = match &self.events {
            Events::All => true,
            Events::Only(kinds) => kinds.contains(&notice.kind),
        };
        subscribed && self.selector.matches(&notice.namespace, &notice.labels)
    }

    /// Where the route sends, as logs may show it: the URL's scheme, host
    /// and port only (a path or query may carry a token), or the Secret
    /// holding it.
    pub fn shown_target(&self) -> String {
        match &self.target {
            Target::Url(url) => shown(url),
            Target::Secret(secret) => {
                format!("the URL in Secret {} key {}", secret.name, secret.key)
            }
        }
    }
}

/// `url`'s scheme, host and port, never its user, password, path or query.
pub fn shown(url: &Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{}://{host}:{port}", url.scheme()),
        (Some(host), None) => format!("{}://{host}", url.scheme()),
        _ => format!("{}:", url.scheme()),
    }
}

/// `text` as an absolute http(s) URL with a host.
pub fn http_url(text: &str) -> Result<Url, UrlProblem> {
    let url = Url::parse(text.trim()).map_err(UrlProblem::Unparsable)?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(UrlProblem::NotHttp { shown: shown(&url) });
    }
    Ok(url)
}

/// The URL parser's error (`url::ParseError`, named through reqwest's
/// `Url`): its text is a reason, never the input.
type UrlParseError = <Url as std::str::FromStr>::Err;

/// Why a text is not a route's URL. Neither says the text (it may hold a
/// token): the parser's reason, or the URL as [`shown`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlProblem {
    #[error("url: {0}")]
    Unparsable(UrlParseError),
    #[error("url: {shown}: scheme is not http or https, or there is no host")]
    NotHttp { shown: String },
}

/// What is wrong with one written route.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteProblem {
    /// A field is missing, unknown or of the wrong type; `path` is where
    /// (`events[2]`), empty for the route itself.
    #[error("{}{message}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
    Field { path: String, message: String },
    #[error("exactly one of url and urlSecretRef is needed")]
    Target,
    #[error(transparent)]
    Url(#[from] UrlProblem),
    #[error("events: empty (list event words, or \"*\" for all)")]
    NoEvents,
    #[error("events: {0}")]
    Event(#[from] UnknownWord),
    #[error(transparent)]
    Selector(#[from] SelectorProblem),
    #[error("auth {0} needs a secretRef")]
    AuthWithoutSecret(AuthKind),
    #[error("secretRef needs auth: bearer or hmac (how the secret is used)")]
    SecretWithoutAuth,
    #[error("another route has this name")]
    NameTaken,
}

/// Why a route was left out. Each names where it was written and the
/// route (by name, or by position when it has none); none repeats a URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The whole key is not a YAML list of routes: none of it is used.
    #[error("{origin}: not a list of routes: {message}")]
    Document { origin: String, message: String },
    #[error("{origin} line {line}: route {route}: {problem}")]
    Route {
        origin: String,
        line: u64,
        route: String,
        problem: RouteProblem,
    },
    #[error("--notify-webhook {route}: {problem}")]
    Flag { route: String, problem: UrlProblem },
}

/// A route as written in the ConfigMap.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Written {
    name: String,
    url: Option<String>,
    url_secret_ref: Option<SecretRef>,
    events: Vec<String>,
    #[serde(default)]
    selector: AppSelector,
    #[serde(default = "json_format")]
    format: Format,
    secret_ref: Option<SecretRef>,
    auth: Option<AuthKind>,
}

fn json_format() -> Format {
    Format::Json
}

/// The routes in one ConfigMap key, `origin` naming it in errors
/// (`ConfigMap tether-system/tether-notifications key routes.yaml`): the
/// good ones, and an error for each one left out. Names already in
/// `taken` (routes of other keys, or of the flags) are errors too; the
/// names used here are added to it.
pub fn parse(
    origin: &str,
    text: &str,
    taken: &mut HashSet<String>,
) -> (Vec<Route>, Vec<RouteError>) {
    let document = if text.trim().is_empty() {
        Ok(Vec::new())
    } else {
        serde_saphyr::from_str::<Vec<serde_saphyr::Spanned<Value>>>(text)
    };
    let written = match document {
        Ok(written) => written,
        Err(error) => {
            let message = error
                .to_string()
                .lines()
                .next()
                .unwrap_or_default()
                .to_string();
            let error = RouteError::Document {
                origin: origin.to_string(),
                message,
            };
            return (Vec::new(), vec![error]);
        }
    };
    let mut routes = Vec::new();
    let mut errors = Vec::new();
    for (index, spanned) in written.into_iter().enumerate() {
        let route = match spanned.value.get("name").and_then(Value::as_str) {
            Some(name) => format!("{name:?}"),
            None => format!("#{}", index + 1),
        };
        let error = |problem: RouteProblem| RouteError::Route {
            origin: origin.to_string(),
            line: spanned.referenced.line(),
            route: route.clone(),
            problem,
        };
        let checked = serde_path_to_error::deserialize::<_, Written>(&spanned.value)
            .map_err(|error| RouteProblem::Field {
                path: match error.path().to_string().as_str() {
                    "." => String::new(),
                    path => path.to_string(),
                },
                message: error.inner().to_string(),
            })
            .and_then(check);
        match checked {
            Ok(checked) if !taken.insert(checked.name.clone()) => {
                errors.push(error(RouteProblem::NameTaken))
            }
            Ok(checked) => routes.push(checked),
            Err(problem) => errors.push(error(problem)),
        }
    }
    (routes, errors)
}

/// A written route, checked: one target, known event words, a valid
/// selector, and credentials with a way to use them (or neither).
fn check(written: Written) -> Result<Route, RouteProblem> {
    let target = match (written.url, written.url_secret_ref) {
        (Some(url), None) => Target::Url(http_url(&url)?),
        (None, Some(secret)) => Target::Secret(secret),
        _ => return Err(RouteProblem::Target),
    };
    let events = events(&written.events)?;
    if let Some(problem) = written.selector.problem() {
        return Err(problem.into());
    }
    let auth = match (written.auth, written.secret_ref) {
        (Some(kind), Some(secret)) => Some(Auth { kind, secret }),
        (None, None) => None,
        (Some(kind), None) => return Err(RouteProblem::AuthWithoutSecret(kind)),
        (None, Some(_)) => return Err(RouteProblem::SecretWithoutAuth),
    };
    Ok(Route {
        name: written.name,
        target,
        events,
        selector: written.selector,
        format: written.format,
        auth,
    })
}

fn events(words: &[String]) -> Result<Events, RouteProblem> {
    if words.is_empty() {
        return Err(RouteProblem::NoEvents);
    }
    if words.iter().any(|word| word == "*") {
        return Ok(Events::All);
    }
    let kinds = words.iter().map(|word| NoticeKind::parse(word));
    Ok(Events::Only(kinds.collect::<Result<_, _>>()?))
}

#[cfg(test)]
mod tests {
    use tether_testkit::notice;

    use super::*;

    const ORIGIN: &str = "ConfigMap tether-system/tether-notifications key routes.yaml";

    fn parse_all(text: &str) -> (Vec<Route>, Vec<String>) {
        let (routes, errors) = parse(ORIGIN, text, &mut HashSet::new());
        (routes, errors.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn a_full_route_reads_with_every_field() {
        let (routes, errors) = parse_all(
            r#"
- name: payments-oncall
  url: https://hooks.example.com/tether?token=x
  events: [sync-failed, not-synced-too-long]
  selector:
    namespaces: [shop]
    matchLabels: {team: payments}
    matchExpressions:
      - {key: tier, operator: In, values: [prod]}
  format: slack
  secretRef: {name: pager, key: token}
  auth: hmac
- name: everything
  urlSecretRef: {name: slack, key: url}
  events: ["*"]
"#,
        );
        assert_eq!(errors, Vec::<String>::new());
        let [oncall, everything] = &routes[..] else {
            panic!("{routes:?}")
        };
        assert_eq!(oncall.name, "payments-oncall");
        assert_eq!(oncall.shown_target(), "https://hooks.example.com");
        assert_eq!(
            oncall.events,
            Events::Only([NoticeKind::SyncFailed, NoticeKind::NotSyncedTooLong].into())
        );
        assert_eq!(oncall.format, Format::Slack);
        assert_eq!(
            oncall.auth,
            Some(Auth {
                kind: AuthKind::Hmac,
                secret: SecretRef {
                    name: "pager".into(),
                    key: "token".into()
                }
            })
        );
        assert_eq!(everything.events, Events::All);
        assert_eq!(everything.format, Format::Json);
        assert_eq!(everything.shown_target(), "the URL in Secret slack key url");
    }

    #[test]
    fn a_route_wants_its_events_for_the_apps_it_selects() {
        let (routes, _) = parse_all(
            "- name: a\n  url: http://127.0.0.1:1/\n  events: [sync-failed]\n  selector: {matchLabels: {team: payments}}\n",
        );
        let route = &routes[0];
        let payments = [("team", "payments")];
        assert!(route.wants(&notice(NoticeKind::SyncFailed, "shop", &payments)));
        assert!(!route.wants(&notice(NoticeKind::DriftDetected, "shop", &payments)));
        assert!(!route.wants(&notice(
            NoticeKind::SyncFailed,
            "shop",
            &[("team", "search")]
        )));
        let all = Route::webhook(1, "http://127.0.0.1:9/hook").unwrap();
        for kind in NoticeKind::ALL {
            assert!(all.wants(&notice(*kind, "any", &[])));
        }
    }

    #[test]
    fn a_malformed_route_is_named_with_its_line_and_the_others_are_kept() {
        let (routes, errors) = parse_all(
            r#"- name: good
  url: http://127.0.0.1:1/
  events: ["*"]
- name: typo
  url: http://127.0.0.1:2/
  events: [sync-faild]
- url: http://127.0.0.1:3/
  events: ["*"]
- name: no-target
  events: ["*"]
- name: half-auth
  url: http://127.0.0.1:4/
  events: ["*"]
  secretRef: {name: s, key: k}
- name: bad-format
  url: http://127.0.0.1:5/
  events: ["*"]
  format: xml
- name: good
  url: http://127.0.0.1:6/
  events: ["*"]
- name: ftp
  url: ftp://example.com/secret-path
  events: ["*"]
"#,
        );
        assert_eq!(
            routes.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            ["good"]
        );
        let expected = [
            "line 4: route \"typo\": events: \"sync-faild\" is not a notification event (state-changed, not-synced-too-long",
            "line 7: route #3: missing field `name`",
            "line 9: route \"no-target\": exactly one of url and urlSecretRef is needed",
            "line 11: route \"half-auth\": secretRef needs auth: bearer or hmac",
            "line 15: route \"bad-format\": format: \"xml\" is not a payload format (json, slack)",
            "line 19: route \"good\": another route has this name",
            "line 22: route \"ftp\": url: ftp://example.com: scheme is not http or https",
        ];
        assert_eq!(errors.len(), expected.len(), "{errors:#?}");
        for (error, expected) in errors.iter().zip(expected) {
            assert!(
                error.starts_with(&format!("{ORIGIN} {expected}")),
                "{error}\nshould start with\n{ORIGIN} {expected}"
            );
        }
        assert!(!errors.iter().any(|e| e.contains("secret-path")));
    }

    #[test]
    fn a_key_that_is_not_a_list_is_one_error_and_an_empty_key_no_route() {
        let (routes, errors) = parse_all("name: lonely\nurl: http://x/\n");
        assert!(routes.is_empty());
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with(&format!("{ORIGIN}: not a list of routes")),
            "{}",
            errors[0]
        );
        assert_eq!(parse_all("  \n"), (Vec::new(), Vec::new()));
    }

    #[test]
    fn a_webhook_flag_that_is_not_a_url_is_named_without_repeating_it() {
        let error = Route::webhook(2, "not a url?token=hunter2").unwrap_err();
        assert_eq!(
            error.to_string(),
            "--notify-webhook notify-webhook-2: url: relative URL without a base"
        );
        let route = Route::webhook(1, "https://user:pw@hooks.example.com:8443/x?t=1").unwrap();
        assert_eq!(route.shown_target(), "https://hooks.example.com:8443");
    }
}
