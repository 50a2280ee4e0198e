//! Resolving a revision against the refs a remote advertised.

use gix::ObjectId;

use super::{GitError, RemoteRefs, redact_url};
use crate::spec::Revision;

/// A revision resolved to a commit, and the tag that named it, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub commit: ObjectId,
    /// The tag's short name (`v1.2.0`) when the revision named a tag.
    pub tag: Option<String>,
    /// The annotated tag object, if the tag is annotated.
    pub tag_object: Option<ObjectId>,
}

/// Resolves `revision` using `refs` (as just listed by the remote). An exact
/// commit id must already be in the object store (`has_object`).
pub fn resolve(
    url: &str,
    refs: &RemoteRefs,
    revision: &Revision,
    has_object: impl Fn(ObjectId) -> bool,
) -> Result<Resolved, GitError> {
    let unknown = |revision: String, reason: &str| GitError::UnknownRevision {
        url: redact_url(url),
        revision,
        reason: reason.to_string(),
    };
    let branch = |commit| Resolved {
        commit,
        tag: None,
        tag_object: None,
    };
    match revision {
        Revision::Head => refs
            .head
            .map(branch)
            .ok_or_else(|| unknown("HEAD".into(), "the remote has no HEAD")),
        Revision::Commit(sha) => {
            let id = ObjectId::from_hex(sha.as_bytes())
                .map_err(|_| unknown(sha.clone(), "not a commit id"))?;
            if has_object(id) {
                Ok(branch(id))
            } else {
                Err(unknown(
                    sha.clone(),
                    "no branch or tag of the remote contains this commit",
                ))
            }
        }
        Revision::Range(range) => {
            let best = refs
                .refs
                .iter()
                .filter_map(|(name, tip)| {
                    let tag = name.strip_prefix("refs/tags/")?;
                    let version =
                        semver::Version::parse(tag.strip_prefix('v').unwrap_or(tag)).ok()?;
                    range.matches(&version).then_some((version, tag, tip))
                })
                .max_by(|a, b| a.0.cmp(&b.0));
            let (_, tag, tip) =
                best.ok_or_else(|| unknown(range.to_string(), "no tag matches the range"))?;
            Ok(tagged(tag, tip))
        }
        Revision::Name(name) => {
            let candidates = if name.starts_with("refs/") {
                vec![name.clone()]
            } else {
                vec![format!("refs/tags/{name}"), format!("refs/heads/{name}")]
            };
            let (full, tip) = candidates
                .iter()
                .find_map(|full| refs.refs.get(full).map(|tip| (full, tip)))
                .ok_or_else(|| unknown(name.clone(), "no such branch or tag"))?;
            Ok(match full.strip_prefix("refs/tags/") {
                Some(tag) => tagged(tag, tip),
                None => branch(tip.commit),
            })
        }
    }
}

/// Whether `revision` names another commit (or tag) in `after` than in
/// `before`, two listings of the same remote: a branch moved, a newer tag
/// matches a range, a missing branch appeared. An exact commit never moves.
pub fn moved(before: &RemoteRefs, after: &RemoteRefs, revision: &Revision) -> bool {
    if matches!(revision, Revision::Commit(_)) {
        return false;
    }
    let resolved = |refs: &RemoteRefs| resolve("", refs, revision, |_| false).ok();
    resolved(before) != resolved(after)
}

/// Whether `revision` names, in `refs`, another commit than `synced` (the
/// commit an app last synced, as hex): what a first listing of a remote
/// compares against, having no listing before it.
pub fn differs(refs: &RemoteRefs, revision: &Revision, synced: &str) -> bool {
    if matches!(revision, Revision::Commit(_)) {
        return false;
    }
    resolve("", refs, revision, |_| false)
        .is_ok_and(|resolved| !resolved.commit.to_string().eq_ignore_ascii_case(synced))
}

fn tagged(tag: &str, tip: &super::RemoteRef) -> Resolved {
    Resolved {
        commit: tip.commit,
        tag: Some(tag.to_string()),
        tag_object: (tip.object != tip.commit).then_some(tip.object),
    }
}

#[cfg(test)]
mod tests {
    use super::super::RemoteRef;
    use super::*;

    fn id(n: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[n; 20])
    }

    fn refs() -> RemoteRefs {
        let mut refs = RemoteRefs {
            head: Some(id(1)),
            ..Default::default()
        };
        for (name, object, commit) in [
            ("refs/heads/main", 1, 1),
            ("refs/tags/v1.2.0", 2, 2),
            ("refs/tags/v1.4.3", 3, 13),
            ("refs/tags/1.9.0", 4, 4),
            ("refs/tags/v2.0.0", 5, 5),
            ("refs/tags/not-a-version", 6, 6),
        ] {
            let tip = RemoteRef {
                object: id(object),
                commit: id(commit),
            };
            refs.refs.insert(name.into(), tip);
        }
        refs
    }

    fn resolve_text(text: &str) -> Result<Resolved, GitError> {
        resolve("u", &refs(), &Revision::parse(text).unwrap(), |i| {
            i == id(9)
        })
    }

    #[test]
    fn a_semver_range_picks_the_highest_matching_tag() {
        let resolved = resolve_text(">=1.2.0 <2.0.0").unwrap();
        assert_eq!(resolved.tag.as_deref(), Some("1.9.0"));
        let resolved = resolve_text("1.4.*").unwrap();
        assert_eq!(resolved.tag.as_deref(), Some("v1.4.3"));
        assert_eq!(resolved.commit, id(13));
        assert_eq!(resolved.tag_object, Some(id(3)));
        assert!(
            resolve_text(">=3.0.0")
                .unwrap_err()
                .to_string()
                .contains("no tag matches")
        );
    }

    #[test]
    fn a_revision_moved_when_it_resolves_elsewhere_in_a_new_listing() {
        let before = refs();
        let mut after = refs();
        let tip = RemoteRef {
            object: id(7),
            commit: id(7),
        };
        after.refs.insert("refs/heads/main".into(), tip);
        let moved_text =
            |after: &RemoteRefs, text: &str| moved(&before, after, &Revision::parse(text).unwrap());
        assert!(moved_text(&after, "main"));
        assert!(!moved_text(&after, "v1.2.0"), "another ref moved");
        assert!(!moved_text(&after, ""), "HEAD did not move");
        let commit = id(1).to_string();
        assert!(!moved_text(&after, &commit), "a commit never moves");

        after.refs.insert("refs/tags/v1.9.5".into(), tip);
        after.refs.insert("refs/heads/feature".into(), tip);
        assert!(moved_text(&after, "1.*"), "a newer tag matches the range");
        assert!(!moved_text(&after, "~1.2"));
        assert!(moved_text(&after, "feature"), "the branch appeared");
    }

    #[test]
    fn branches_tags_head_and_commits_resolve() {
        assert_eq!(resolve_text("").unwrap().commit, id(1));
        assert_eq!(resolve_text("main").unwrap().tag, None);
        assert_eq!(resolve_text("v1.2.0").unwrap().tag_object, None);
        let sha = id(9).to_string();
        assert_eq!(resolve_text(&sha).unwrap().commit, id(9));
        assert!(resolve_text(&id(8).to_string()).is_err());
        let error = resolve_text("nope").unwrap_err();
        assert_eq!(
            error.to_string(),
            "u: unknown revision \"nope\": no such branch or tag"
        );
        assert!(!error.is_retryable());
    }
}
