//! Push webhooks from GitHub, GitLab and Gitea/Forgejo: verify the request
//! and say which repository and branch were pushed. Pure: the HTTP route
//! (in the controller) passes headers and body in and maps
//! [`WebhookError::Unauthorized`] to 401.
//!
//! A push only *triggers* an early fetch; the fetch itself decides what
//! changed, so a forged-but-verified event can do no more than a poll.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

/// A verified push: the repository's URLs (match them with
/// [`crate::git::repo_key`]) and the pushed branch or tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Push {
    /// Every URL form the event names (HTTPS clone, SSH, web).
    pub repo_urls: Vec<String>,
    /// The pushed ref, e.g. `refs/heads/main`.
    pub git_ref: String,
    /// Every file path the pushed commits added, modified or removed, when
    /// the event lists them all; `None` when it cannot say (no commits
    /// listed, a list cut short, a force push, a created or deleted ref).
    pub changed_paths: Option<Vec<String>>,
    /// The sender's id of this delivery (`X-GitHub-Delivery`,
    /// `X-Gitlab-Event-UUID`, `X-Gitea-Delivery`, `X-Forgejo-Delivery`):
    /// the same on a redelivery or a replay.
    pub delivery: Option<String>,
    /// The ref's commit before and after the push (`before`, `after`).
    pub before: Option<String>,
    pub after: Option<String>,
}

impl Push {
    /// The branch name if a branch was pushed.
    pub fn branch(&self) -> Option<&str> {
        self.git_ref.strip_prefix("refs/heads/")
    }
}

/// Why a webhook request was not accepted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WebhookError {
    /// Bad or missing signature/token: answer 401 and change nothing.
    #[error("{provider} webhook: {reason}")]
    Unauthorized {
        provider: &'static str,
        reason: &'static str,
    },
    /// Not a push event (ping, issues, …): answer 202 and do nothing.
    #[error("{provider} webhook: ignored event {event:?}")]
    Ignored {
        provider: &'static str,
        event: String,
    },
    /// Unrecognized sender or unreadable payload: answer 400.
    #[error("webhook: {0}")]
    BadRequest(String),
}

/// Verifies and parses a push event. `header` looks up a request header
/// (case-insensitively); `secret` is the shared webhook secret.
pub fn parse_push(
    header: impl Fn(&str) -> Option<String>,
    body: &[u8],
    secret: &[u8],
) -> Result<Push, WebhookError> {
    let (provider, event) = sender(&header)?;
    authenticate(provider, &header, body, secret)?;
    let is_push = matches!(event.as_str(), "push" | "Push Hook" | "Tag Push Hook");
    if !is_push {
        return Err(WebhookError::Ignored { provider, event });
    }
    let payload: Value =
        serde_json::from_slice(body).map_err(|e| WebhookError::BadRequest(e.to_string()))?;
    let repo_urls = repository_urls(&payload);
    let git_ref = payload["ref"].as_str().unwrap_or_default().to_string();
    if repo_urls.is_empty() || git_ref.is_empty() {
        return Err(WebhookError::BadRequest(
            "push event without repository URL or ref".into(),
        ));
    }
    let delivery = [
        "X-GitHub-Delivery",
        "X-Gitlab-Event-UUID",
        "X-Gitea-Delivery",
        "X-Forgejo-Delivery",
    ]
    .iter()
    .find_map(|name| header(name))
    .filter(|id| !id.is_empty());
    let commit = |name: &str| payload[name].as_str().map(str::to_string);
    Ok(Push {
        repo_urls,
        git_ref,
        changed_paths: changed_paths(&payload),
        delivery,
        before: commit("before"),
        after: commit("after"),
    })
}

/// Who sent the request (`gitea` for Gitea and Forgejo, `github`,
/// `gitlab`) and the event it names.
fn sender(
    header: &impl Fn(&str) -> Option<String>,
) -> Result<(&'static str, String), WebhookError> {
    if let Some(event) = header("X-Gitea-Event").or_else(|| header("X-Forgejo-Event")) {
        Ok(("gitea", event))
    } else if let Some(event) = header("X-GitHub-Event") {
        Ok(("github", event))
    } else if let Some(event) = header("X-Gitlab-Event") {
        Ok(("gitlab", event))
    } else {
        Err(WebhookError::BadRequest(
            "not a GitHub, GitLab, Gitea or Forgejo event".into(),
        ))
    }
}

/// Checks the request's proof of the shared `secret`: GitLab's token, or
/// the others' HMAC-SHA256 signature of `body`.
fn authenticate(
    provider: &'static str,
    header: &impl Fn(&str) -> Option<String>,
    body: &[u8],
    secret: &[u8],
) -> Result<(), WebhookError> {
    let unauthorized = |reason| WebhookError::Unauthorized { provider, reason };
    if provider == "gitlab" {
        let token = header("X-Gitlab-Token").ok_or(unauthorized("missing X-Gitlab-Token"))?;
        return match constant_time_eq(token.as_bytes(), secret) {
            true => Ok(()),
            false => Err(unauthorized("X-Gitlab-Token does not match")),
        };
    }
    let signature = header("X-Hub-Signature-256")
        .or_else(|| header("X-Gitea-Signature").map(|s| format!("sha256={s}")))
        .or_else(|| header("X-Forgejo-Signature").map(|s| format!("sha256={s}")))
        .ok_or(unauthorized("missing signature header"))?;
    let hex_digest = signature
        .strip_prefix("sha256=")
        .ok_or(unauthorized("signature is not sha256=…"))?;
    let expected = hex::decode(hex_digest).map_err(|_| unauthorized("signature is not hex"))?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    mac.verify_slice(&expected)
        .map_err(|_| unauthorized("signature does not match"))
}

/// Every URL the push payload gives for its repository (clone, SSH, web;
/// GitHub and Gitea under `repository`, GitLab under `project` too).
fn repository_urls(payload: &Value) -> Vec<String> {
    let repository = &payload["repository"];
    let project = &payload["project"];
    [
        &repository["clone_url"],
        &repository["ssh_url"],
        &repository["html_url"],
        &repository["git_http_url"],
        &repository["git_ssh_url"],
        &project["git_http_url"],
        &project["git_ssh_url"],
        &project["web_url"],
    ]
    .iter()
    .filter_map(|v| v.as_str().map(str::to_string))
    .collect()
}

/// The most commits GitHub lists in a push webhook; a list this long may
/// have been cut short.
const GITHUB_COMMIT_LIMIT: usize = 2048;

/// The paths the push's commits touched, if the payload lists all of them.
/// GitLab lists at most 20 commits (`total_commits_count` says how many
/// were pushed), Gitea/Forgejo a configured number (`total_commits`),
/// GitHub up to 2048.
fn changed_paths(payload: &Value) -> Option<Vec<String>> {
    let flag = |name: &str| payload[name].as_bool().unwrap_or(false);
    if flag("forced") || flag("created") || flag("deleted") {
        return None;
    }
    let commits = payload["commits"].as_array().filter(|c| !c.is_empty())?;
    let total = payload["total_commits_count"]
        .as_u64()
        .or_else(|| payload["total_commits"].as_u64());
    let cut_short = match total {
        Some(total) => total as usize > commits.len(),
        None => commits.len() >= GITHUB_COMMIT_LIMIT,
    };
    if cut_short {
        return None;
    }
    let mut paths = Vec::new();
    for commit in commits {
        for list in ["added", "modified", "removed"] {
            for path in commit[list].as_array()? {
                paths.push(path.as_str()?.to_string());
            }
        }
    }
    paths.sort();
    paths.dedup();
    Some(paths)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_lowercase(), v.to_string()))
            .collect();
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name.to_lowercase())
                .map(|(_, v)| v.clone())
        }
    }

    fn sign(body: &[u8], secret: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
        mac.update(body);
        hex::encode(mac.finalize().into_bytes())
    }

    const GITHUB: &str = r#"{"ref":"refs/heads/main","repository":{"clone_url":"https://github.com/shop/web.git","ssh_url":"git@github.com:shop/web.git","html_url":"https://github.com/shop/web"}}"#;

    #[test]
    fn a_github_push_with_a_good_signature_names_repository_and_branch() {
        let body = GITHUB.as_bytes();
        let signature = format!("sha256={}", sign(body, b"s3cret"));
        let push = parse_push(
            headers(&[
                ("X-GitHub-Event", "push"),
                ("X-Hub-Signature-256", &signature),
                ("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            ]),
            body,
            b"s3cret",
        )
        .unwrap();
        assert_eq!(push.branch(), Some("main"));
        assert_eq!(
            push.delivery.as_deref(),
            Some("72d3162e-cc78-11e3-81ab-4c9367dc0958")
        );
        assert!(
            push.repo_urls
                .contains(&"git@github.com:shop/web.git".to_string())
        );
    }

    fn github_push(extra: &str) -> Push {
        let body = format!(
            r#"{{"ref":"refs/heads/main","repository":{{"clone_url":"https://github.com/shop/web.git"}}{extra}}}"#
        );
        let signature = format!("sha256={}", sign(body.as_bytes(), b"s3cret"));
        parse_push(
            headers(&[
                ("X-GitHub-Event", "push"),
                ("X-Hub-Signature-256", &signature),
            ]),
            body.as_bytes(),
            b"s3cret",
        )
        .unwrap()
    }

    #[test]
    fn a_push_lists_the_paths_its_commits_touched() {
        let push = github_push(
            r#","commits":[{"added":["apps/web/new.yaml"],"modified":["apps/web/a.yaml"],"removed":[]},
                           {"added":[],"modified":["apps/web/a.yaml"],"removed":["apps/api/old.yaml"]}]"#,
        );
        assert_eq!(
            push.changed_paths.unwrap(),
            ["apps/api/old.yaml", "apps/web/a.yaml", "apps/web/new.yaml"]
        );
    }

    #[test]
    fn a_push_that_cannot_say_what_changed_lists_no_paths() {
        let one = r#"{"added":[],"modified":["a.yaml"],"removed":[]}"#;
        for extra in [
            String::new(),
            r#","commits":[]"#.to_string(),
            format!(r#","forced":true,"commits":[{one}]"#),
            format!(r#","created":true,"commits":[{one}]"#),
            format!(r#","total_commits_count":21,"commits":[{one}]"#),
            format!(r#","total_commits":6,"commits":[{one}]"#),
            r#","commits":[{"message":"no file lists"}]"#.to_string(),
        ] {
            assert_eq!(github_push(&extra).changed_paths, None, "{extra}");
        }
        let complete = format!(r#","total_commits_count":1,"commits":[{one}]"#);
        assert_eq!(github_push(&complete).changed_paths.unwrap(), ["a.yaml"]);
    }

    #[test]
    fn a_bad_or_missing_signature_is_unauthorized() {
        let body = GITHUB.as_bytes();
        let forged = format!("sha256={}", sign(body, b"guess"));
        let error = parse_push(
            headers(&[("X-GitHub-Event", "push"), ("X-Hub-Signature-256", &forged)]),
            body,
            b"s3cret",
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "github webhook: signature does not match"
        );
        let error =
            parse_push(headers(&[("X-GitHub-Event", "push")]), body, b"s3cret").unwrap_err();
        assert!(matches!(error, WebhookError::Unauthorized { .. }));
    }

    #[test]
    fn a_gitlab_push_is_checked_by_token() {
        let body = br#"{"ref":"refs/heads/dev","project":{"git_http_url":"https://gitlab.com/shop/web.git","git_ssh_url":"git@gitlab.com:shop/web.git"}}"#;
        let push = parse_push(
            headers(&[("X-Gitlab-Event", "Push Hook"), ("X-Gitlab-Token", "tok")]),
            body,
            b"tok",
        )
        .unwrap();
        assert_eq!(push.branch(), Some("dev"));
        let error = parse_push(
            headers(&[("X-Gitlab-Event", "Push Hook"), ("X-Gitlab-Token", "nope")]),
            body,
            b"tok",
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "gitlab webhook: X-Gitlab-Token does not match"
        );
    }

    #[test]
    fn a_gitea_or_forgejo_push_is_checked_by_hmac_and_other_events_are_ignored() {
        let body = br#"{"ref":"refs/tags/v1.0.0","repository":{"clone_url":"https://git.example.com/shop/web.git"}}"#;
        let signature = sign(body, b"k");
        let push = parse_push(
            headers(&[("X-Gitea-Event", "push"), ("X-Gitea-Signature", &signature)]),
            body,
            b"k",
        )
        .unwrap();
        assert_eq!(
            (push.branch(), push.git_ref.as_str()),
            (None, "refs/tags/v1.0.0")
        );
        let forgejo = parse_push(
            headers(&[
                ("X-Forgejo-Event", "push"),
                ("X-Forgejo-Signature", &signature),
            ]),
            body,
            b"k",
        );
        assert!(forgejo.is_ok());
        let ping = parse_push(
            headers(&[("X-Gitea-Event", "ping"), ("X-Gitea-Signature", &signature)]),
            body,
            b"k",
        );
        assert!(matches!(ping, Err(WebhookError::Ignored { .. })));
    }
}
