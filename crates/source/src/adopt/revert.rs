//! `tether rollback --revert`: one commit on the source's tracked branch
//! whose tree for the app's path equals a pinned revision's — the commits
//! since then are undone for that path, nothing else in the repository
//! changes — written and pushed with adopt's [`Checkout`] (and so with
//! the app's repository credentials).

use super::{AdoptError, Author, Checkout};
use crate::credentials::Credentials;
use crate::spec::Source;

/// What to revert, and who and why.
#[derive(Debug, Clone)]
pub struct RevertRequest<'a> {
    pub source: &'a Source,
    /// The Application, `namespace/name`: named in the commit message.
    pub app: &'a str,
    /// The commit whose path tree the branch returns to.
    pub revision: &'a str,
    /// The history entry it came from (`status.history[].id`).
    pub history_id: Option<u64>,
    pub reason: &'a str,
    /// The Kubernetes user who rolled back.
    pub by: &'a str,
    pub author: &'a Author,
    pub credentials: Option<&'a Credentials>,
}

/// The revert commit, or `None` when the branch already had that tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reverted {
    pub commit: Option<String>,
    pub branch: String,
    /// The commits undone for the path (`short-sha subject`), newest first.
    pub undone: Vec<String>,
}

/// Clones the tracked branch, restores the app's path to `revision`'s
/// tree, commits as `author` and pushes. A refused push keeps the commit
/// in a local clone ([`AdoptError::PushRefused`]).
pub fn revert(request: &RevertRequest<'_>) -> Result<Reverted, AdoptError> {
    let source = request.source;
    // Clone the tracked branch.
    let checkout = Checkout::clone(&source.repo_url, &source.revision, request.credentials)?;
    // Restore the path.
    let undone = checkout.restore(request.revision, &source.path)?;
    // Commit as the operator.
    let message = message(request, &undone);
    let Some(commit) = checkout.commit(request.author, &message)? else {
        return Ok(Reverted {
            commit: None,
            branch: checkout.branch.clone(),
            undone,
        });
    };
    // Push, keeping the commit when the remote refuses it.
    let branch = checkout.branch.clone();
    checkout.push_or_keep(&commit, &branch)?;
    Ok(Reverted {
        commit: Some(commit),
        branch,
        undone,
    })
}

/// The commit message: the app, the history id and the reason in the
/// subject; the commits undone; trailers naming the app, the history
/// entry and who rolled back.
pub fn message(request: &RevertRequest<'_>, undone: &[String]) -> String {
    let short = request.revision.get(..12).unwrap_or(request.revision);
    let entry = match request.history_id {
        Some(id) => format!("history {id} ({short})"),
        None => short.to_string(),
    };
    let reason = request.reason.trim().lines().next().unwrap_or_default();
    let mut text = format!("Roll back Application {} to {entry}", request.app);
    if !reason.is_empty() {
        text.push_str(&format!(": {reason}"));
    }
    let path = match request.source.path.trim_matches('/') {
        "" | "." => "the repository".to_string(),
        path => path.to_string(),
    };
    text.push_str(&format!(
        "\n\nRestores {path} to its tree at {}.\n",
        request.revision
    ));
    if !undone.is_empty() {
        text.push_str("Undoes:\n");
        for commit in undone {
            text.push_str(&format!("  {commit}\n"));
        }
    }
    text.push_str(&format!("\nTether-Application: {}\n", request.app));
    if let Some(id) = request.history_id {
        text.push_str(&format!("Tether-History-Id: {id}\n"));
    }
    text.push_str(&format!("Rolled-back-by: {}\n", request.by));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_app_the_history_entry_the_reason_and_who() {
        let source = Source {
            repo_url: "file:///srv/git/shop.git".into(),
            path: "shop".into(),
            ..Default::default()
        };
        let author: Author = "Ada <ada@example.com>".parse().unwrap();
        let revision = "0123456789abcdef0123456789abcdef01234567";
        let request = RevertRequest {
            source: &source,
            app: "tether/shop",
            revision,
            history_id: Some(2),
            reason: "INC-7: bad image",
            by: "alice",
            author: &author,
            credentials: None,
        };
        let text = message(&request, &["abc1234 bump image".to_string()]);
        assert!(text.starts_with(
            "Roll back Application tether/shop to history 2 (0123456789ab): INC-7: bad image\n"
        ));
        assert!(text.contains(&format!("Restores shop to its tree at {revision}.")));
        assert!(text.contains("  abc1234 bump image\n"));
        assert!(text.contains("Tether-History-Id: 2\n"));
        assert!(text.ends_with("Rolled-back-by: alice\n"));
    }
}
