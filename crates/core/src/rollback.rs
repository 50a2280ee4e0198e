//! Rollback (`tether rollback`, as Argo CD's `app rollback`): which
//! revision of an app's sync history a rollback pins the app to, and when
//! the pin is lifted on its own because Git caught up.
//!
//! Pure: the controller and the CLI give the history and what the branch
//! head and the pinned revision render; this module decides.

use std::fmt;

/// One past successful sync, as the history records it (newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced<'a> {
    /// The history entry's id (`status.history[].id`); 0 for an entry
    /// written before ids existed.
    pub id: u64,
    pub revision: &'a str,
}

/// The revision a rollback pins the app to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub id: u64,
    pub revision: String,
}

/// Why no revision can be picked. Each names the app.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickError {
    #[error("Application {app}: history has no entry {id} (it has {known})")]
    UnknownId { app: String, id: u64, known: String },
    #[error(
        "Application {app}: history has no revision before {current} to roll back to (pass --to ID)"
    )]
    NoPrevious { app: String, current: String },
    #[error("Application {app}: has no sync history yet; there is nothing to roll back to")]
    NoHistory { app: String },
}

/// The pin in force when rolling back again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pinned<'a> {
    pub revision: &'a str,
    /// The history entry it was taken from, if known.
    pub id: Option<u64>,
}

/// The revision to pin `app` to: history entry `to` when given, else the
/// newest entry whose revision differs from the one synced now (`history`
/// newest first; its first entry is the one synced now when `current` is
/// not known). Self-heal entries repeat the current revision and are
/// skipped that way. While a pin is in force (`pinned`), rolling back
/// again goes further back: to the newest entry older than the pinned one
/// at another revision — never forward to the revision rolled back from.
pub fn pick(
    app: &str,
    history: &[Synced<'_>],
    current: Option<&str>,
    pinned: Option<Pinned<'_>>,
    to: Option<u64>,
) -> Result<Target, PickError> {
    let target = |entry: &Synced<'_>| Target {
        id: entry.id,
        revision: entry.revision.to_string(),
    };
    if let Some(id) = to {
        return history
            .iter()
            .find(|entry| entry.id == id)
            .map(target)
            .ok_or_else(|| PickError::UnknownId {
                app: app.to_string(),
                id,
                known: known_ids(history),
            });
    }
    let (history, current) = match pinned {
        Some(Pinned {
            revision,
            id: Some(id),
        }) => {
            let older = history
                .iter()
                .position(|entry| entry.id != 0 && entry.id < id);
            (&history[older.unwrap_or(history.len())..], Some(revision))
        }
        Some(Pinned { revision, id: None }) => (history, Some(revision)),
        None => (history, current),
    };
    let current = match current.or_else(|| history.first().map(|entry| entry.revision)) {
        Some(current) => current,
        None => {
            return Err(PickError::NoHistory {
                app: app.to_string(),
            });
        }
    };
    history
        .iter()
        .find(|entry| entry.revision != current)
        .map(target)
        .ok_or_else(|| PickError::NoPrevious {
            app: app.to_string(),
            current: short(current).to_string(),
        })
}

fn known_ids(history: &[Synced<'_>]) -> String {
    match history.is_empty() {
        true => "none".to_string(),
        false => history
            .iter()
            .map(|entry| entry.id.to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}

/// What one revision renders for the app: its path's tree and the digest
/// of its rendered objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rendition<'a> {
    pub commit: &'a str,
    pub tree: &'a str,
    pub digest: &'a str,
}

/// Whether a pin holds or Git caught up with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinVerdict {
    /// The branch head asks for something else: the pinned revision is
    /// applied, and the app is OutOfSync with the branch head.
    Hold,
    /// The branch head asks for exactly the pinned state (a revert commit
    /// landed, or the bad commit was reverted by hand): the pin is lifted.
    GitMatches,
}

impl PinVerdict {
    /// The reason of condition `Pinned` when the pin is lifted this way.
    pub const GIT_MATCHES: &'static str = "GitMatches";
}

/// Whether the pin on `pinned` holds against the branch `head`: it is
/// lifted once the head's path tree, or what it renders, equals the
/// pinned revision's — never while the head *is* the pinned commit
/// (a pin to the head itself holds until the branch moves on).
pub fn judge_pin(head: Rendition<'_>, pinned: Rendition<'_>) -> PinVerdict {
    if head.commit == pinned.commit {
        return PinVerdict::Hold;
    }
    match head.tree == pinned.tree || head.digest == pinned.digest {
        true => PinVerdict::GitMatches,
        false => PinVerdict::Hold,
    }
}

impl fmt::Display for PinVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinVerdict::Hold => write!(f, "Pinned"),
            PinVerdict::GitMatches => write!(f, "{}", PinVerdict::GIT_MATCHES),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history() -> Vec<Synced<'static>> {
        // Newest first: a self-heal at c3, the sync to c3, c2, c1.
        vec![
            Synced {
                id: 4,
                revision: "c3",
            },
            Synced {
                id: 3,
                revision: "c3",
            },
            Synced {
                id: 2,
                revision: "c2",
            },
            Synced {
                id: 1,
                revision: "c1",
            },
        ]
    }

    #[test]
    fn a_rollback_without_an_id_picks_the_newest_revision_before_the_current_one() {
        let picked = pick("tether/shop", &history(), Some("c3"), None, None).unwrap();
        assert_eq!(
            picked,
            Target {
                id: 2,
                revision: "c2".into()
            }
        );
        // Without the synced revision, the newest entry is taken as current.
        assert_eq!(
            pick("tether/shop", &history(), None, None, None)
                .unwrap()
                .id,
            2
        );
    }

    #[test]
    fn a_rollback_to_an_id_picks_that_entry() {
        let picked = pick("tether/shop", &history(), Some("c3"), None, Some(1)).unwrap();
        assert_eq!(picked.revision, "c1");
    }

    #[test]
    fn an_unknown_id_is_refused_naming_the_app_the_id_and_the_ids_there_are() {
        let refused = pick("tether/shop", &history(), Some("c3"), None, Some(9)).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "Application tether/shop: history has no entry 9 (it has 4, 3, 2, 1)"
        );
        let refused = pick("tether/shop", &[], None, None, Some(9)).unwrap_err();
        assert!(refused.to_string().ends_with("(it has none)"));
    }

    #[test]
    fn a_history_of_one_revision_has_nothing_to_roll_back_to() {
        let once = &history()[..2];
        let refused = pick("tether/shop", once, Some("c3"), None, None).unwrap_err();
        assert!(matches!(refused, PickError::NoPrevious { .. }));
        let refused = pick("tether/shop", &[], None, None, None).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "Application tether/shop: has no sync history yet; there is nothing to roll back to"
        );
    }

    #[test]
    fn rolling_back_while_pinned_goes_further_back_not_forward() {
        // Pinned to c2 (entry 2): the rollback's own sync is entry 5.
        let mut pinned_history = history();
        pinned_history.insert(
            0,
            Synced {
                id: 5,
                revision: "c2",
            },
        );
        let pin = Pinned {
            revision: "c2",
            id: Some(2),
        };
        let picked = pick("tether/shop", &pinned_history, Some("c2"), Some(pin), None).unwrap();
        assert_eq!(picked.revision, "c1");
        // Nothing older: said, not a step forward to c3.
        let pin = Pinned {
            revision: "c1",
            id: Some(1),
        };
        let refused = pick("tether/shop", &pinned_history, Some("c1"), Some(pin), None);
        assert!(matches!(refused, Err(PickError::NoPrevious { .. })));
    }

    fn rendition(
        commit: &'static str,
        tree: &'static str,
        digest: &'static str,
    ) -> Rendition<'static> {
        Rendition {
            commit,
            tree,
            digest,
        }
    }

    #[test]
    fn a_pin_holds_while_the_head_renders_something_else() {
        let head = rendition("c3", "t3", "d3");
        let pinned = rendition("c2", "t2", "d2");
        assert_eq!(judge_pin(head, pinned), PinVerdict::Hold);
    }

    #[test]
    fn a_pin_lifts_once_the_head_has_the_pinned_tree_or_renders_the_same_objects() {
        let pinned = rendition("c2", "t2", "d2");
        let revert = rendition("c4", "t2", "d2");
        assert_eq!(judge_pin(revert, pinned), PinVerdict::GitMatches);
        let same_objects = Rendition {
            tree: "t4",
            ..revert
        };
        assert_eq!(judge_pin(same_objects, pinned), PinVerdict::GitMatches);
        assert_eq!(PinVerdict::GitMatches.to_string(), "GitMatches");
    }

    #[test]
    fn a_pin_to_the_head_itself_holds() {
        let head = rendition("c3", "t3", "d3");
        assert_eq!(judge_pin(head, head), PinVerdict::Hold);
    }
}
