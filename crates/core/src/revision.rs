//! Does a fetched revision ask for a sync?
//!
//! A commit is a new revision of the *repository*; it is new desired state
//! for an application only if its rendered objects changed. In a monorepo a
//! push touching one app's directory gives every app a new commit: syncing
//! them all would dry-run and re-apply thousands of unchanged objects ahead
//! of the one app that changed (Argo CD's monorepo complaint). So the last
//! successful sync records a digest of what it applied, and a new commit
//! rendering the same digest is only recorded.

/// What the last successful sync recorded.
#[derive(Debug, Clone, Copy)]
pub struct LastSync<'a> {
    /// The commit live state was last synced to.
    pub revision: &'a str,
    /// Digest of the rendered objects that sync applied (absent in status
    /// written before digests were recorded).
    pub digest: Option<&'a str>,
    /// No sync failed or stopped since (the last operation succeeded). A
    /// failed sync may have applied part of another revision, so live can
    /// differ from what the digest describes.
    pub settled: bool,
}

/// How a fetched revision relates to the last successful sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevisionChange {
    /// The commit live state was synced to.
    Same,
    /// Another commit that renders exactly the objects last synced:
    /// recorded as the synced revision, nothing is applied.
    SameObjects,
    /// New desired state: an automated sync applies it.
    New,
}

/// Compares the fetched `commit` (rendering `digest`) with `last`.
pub fn revision_change(last: Option<LastSync<'_>>, commit: &str, digest: &str) -> RevisionChange {
    match last {
        Some(last) if last.revision == commit => RevisionChange::Same,
        Some(last) if last.settled && last.digest == Some(digest) => RevisionChange::SameObjects,
        _ => RevisionChange::New,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RevisionChange::{New, Same, SameObjects};

    /// How `commit` (rendering to `digest`) relates to the `synced` one.
    fn after(synced: LastSync<'_>, commit: &str, digest: &str) -> RevisionChange {
        revision_change(Some(synced), commit, digest)
    }

    /// A settled sync of commit c1, which rendered digest d1.
    const SETTLED: LastSync<'static> = LastSync {
        revision: "c1",
        digest: Some("d1"),
        settled: true,
    };

    #[test]
    fn an_app_never_synced_has_a_new_revision() {
        assert_eq!(revision_change(None, "c1", "d1"), New);
    }

    #[test]
    fn the_synced_commit_is_the_same_revision() {
        assert_eq!(after(SETTLED, "c1", "d1"), Same);
    }

    #[test]
    fn a_commit_elsewhere_in_the_repository_renders_the_same_objects() {
        assert_eq!(after(SETTLED, "c2", "d1"), SameObjects);
    }

    #[test]
    fn a_commit_that_changes_the_objects_is_new() {
        assert_eq!(after(SETTLED, "c2", "d2"), New);
    }

    #[test]
    fn after_a_failed_sync_returning_to_the_old_objects_syncs_again() {
        // c2 failed half-way; c3 reverts to c1's objects: live may hold
        // part of c2, so c3 is synced, not just recorded.
        let failed_since = LastSync {
            settled: false,
            ..SETTLED
        };
        assert_eq!(after(failed_since, "c3", "d1"), New);
    }

    #[test]
    fn status_without_a_digest_syncs_a_new_commit() {
        let without_digest = LastSync {
            digest: None,
            ..SETTLED
        };
        assert_eq!(after(without_digest, "c2", "d1"), New);
    }
}
