//! Prune: which orphans may be deleted, and when to delete nothing at all.
//!
//! An orphan is an object of the app that Git no longer has. Orphans are
//! always reported; one is deleted only when prune is on, it is in the app's
//! inventory, it carries the app's tracking label *and* annotation (so an
//! object Tether never created, or one another app has since taken over, is
//! never deleted) and it has not opted out. An object Tether adopted (it
//! existed before Tether applied it) is deleted only when the app opts in
//! with `syncPolicy.pruneAdopted`. Two circuit breakers stop every
//! deletion: a render with no objects at all, and a prune that would delete
//! more than a share of the inventory — unless the operator confirmed it.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::object::ObjectRef;
use crate::ownership::is_adopted;
use crate::tracking::{AppRef, is_tracked_by};

/// Per-object opt-out: `tether.dev/prune: disabled`.
pub const PRUNE_ANNOTATION: &str = "tether.dev/prune";
/// The value of [`PRUNE_ANNOTATION`] that keeps an object.
pub const PRUNE_DISABLED: &str = "disabled";

/// The app's prune policy and the operator's confirmation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PruneOptions {
    /// `syncPolicy.prune`; off by default.
    pub prune: bool,
    /// The largest share of the inventory one prune may delete (0.5).
    pub max_share: f64,
    /// The operator confirmed a mass or empty-render prune
    /// (`tether sync APP --allow-mass-prune`).
    pub allow_mass_prune: bool,
    /// `syncPolicy.pruneAdopted`: adopted objects may be deleted too.
    pub prune_adopted: bool,
}

impl Default for PruneOptions {
    fn default() -> Self {
        PruneOptions {
            prune: false,
            max_share: 0.5,
            allow_mass_prune: false,
            prune_adopted: false,
        }
    }
}

/// What happens to one orphan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PruneDecision {
    Delete,
    Keep(KeepReason),
}

/// Why an orphan is kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum KeepReason {
    /// The app does not prune.
    PruneDisabled,
    /// The object carries `tether.dev/prune: disabled`.
    OptedOut,
    /// Tether never applied it for this app.
    NotInInventory,
    /// It lacks this app's label or tracking annotation (never created by
    /// Tether for this app, or since taken over by another app).
    NotTracked,
    /// A circuit breaker tripped; nothing is deleted.
    CircuitBreaker,
    /// It existed before Tether adopted it, and the app does not prune
    /// adopted objects.
    Adopted,
}

impl fmt::Display for KeepReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeepReason::PruneDisabled => "prune is off for this app",
            KeepReason::OptedOut => "annotated tether.dev/prune: disabled",
            KeepReason::NotInInventory => "not in the app's inventory",
            KeepReason::NotTracked => "not labelled and annotated as this app's",
            KeepReason::CircuitBreaker => "prune circuit breaker tripped",
            KeepReason::Adopted => {
                "adopted, not created, by Tether (syncPolicy.pruneAdopted is off)"
            }
        })
    }
}

/// What became of an orphan, as status records it: `Deleted`, or `kept: `
/// and why (a [`KeepReason`], or the error a deletion failed with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PruneFate {
    Deleted,
    /// Why it is kept, in words.
    Kept(String),
}

impl PruneFate {
    const DELETED: &'static str = "Deleted";
    const KEPT: &'static str = "kept: ";

    /// Kept because the plan said so.
    pub fn kept(reason: &KeepReason) -> PruneFate {
        PruneFate::Kept(reason.to_string())
    }

    /// Kept because its deletion failed with `error`.
    pub fn deletion_failed(error: impl fmt::Display) -> PruneFate {
        PruneFate::Kept(format!("deletion failed: {error}"))
    }

    pub fn is_deleted(&self) -> bool {
        *self == PruneFate::Deleted
    }
}

impl fmt::Display for PruneFate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PruneFate::Deleted => f.write_str(Self::DELETED),
            PruneFate::Kept(why) => write!(f, "{}{why}", Self::KEPT),
        }
    }
}

/// A fate equals its text, as status shows it.
impl PartialEq<&str> for PruneFate {
    fn eq(&self, text: &&str) -> bool {
        match self {
            PruneFate::Deleted => *text == Self::DELETED,
            PruneFate::Kept(why) => text.strip_prefix(Self::KEPT) == Some(why.as_str()),
        }
    }
}

impl From<&str> for PruneFate {
    /// Reads a fate back from status; any text but `Deleted` is a reason to
    /// keep.
    fn from(text: &str) -> Self {
        match text {
            Self::DELETED => PruneFate::Deleted,
            _ => PruneFate::Kept(text.strip_prefix(Self::KEPT).unwrap_or(text).to_string()),
        }
    }
}

impl Serialize for PruneFate {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PruneFate {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(|text| PruneFate::from(text.as_str()))
    }
}

/// Why a prune was stopped as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Breaker {
    /// The render produced no objects: more likely a broken source than an
    /// app that should be emptied.
    EmptyRender { inventory: usize },
    /// The prune would delete more than `max_share` of the inventory.
    MassPrune {
        would_delete: usize,
        inventory: usize,
        max_share: f64,
    },
}

impl fmt::Display for Breaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Breaker::EmptyRender { inventory } => write!(
                f,
                "the render produced no objects; deleting all {inventory} needs `tether sync --allow-mass-prune`"
            ),
            Breaker::MassPrune {
                would_delete,
                inventory,
                max_share,
            } => write!(
                f,
                "prune would delete {would_delete} of {inventory} objects (more than {:.0}%); \
                 confirm with `tether sync --allow-mass-prune`",
                max_share * 100.0
            ),
        }
    }
}

/// The prune decision for one sync.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PrunePlan {
    /// Every orphan found live, with its fate.
    pub orphans: Vec<(ObjectRef, PruneDecision)>,
    /// Inventory entries that no longer exist: drop them from the inventory.
    pub gone: Vec<ObjectRef>,
    /// Set when a circuit breaker stopped every deletion.
    pub breaker: Option<Breaker>,
}

impl PrunePlan {
    /// The objects to delete.
    pub fn deletions(&self) -> impl Iterator<Item = &ObjectRef> {
        self.orphans
            .iter()
            .filter(|(_, decision)| *decision == PruneDecision::Delete)
            .map(|(id, _)| id)
    }
}

/// Decides the prune for `app`: `inventory` is what Tether applied before,
/// `desired` what the render produced now, `live` the objects found in the
/// cluster for the app (by label or inventory), each with its identity.
pub fn plan_prune(
    app: &AppRef,
    inventory: &[ObjectRef],
    desired: &[ObjectRef],
    live: &[(ObjectRef, &Value)],
    options: &PruneOptions,
) -> PrunePlan {
    let mut plan = PrunePlan {
        gone: inventory
            .iter()
            .filter(|id| !desired.contains(id) && !live.iter().any(|(found, _)| found == *id))
            .cloned()
            .collect(),
        ..PrunePlan::default()
    };
    for (id, object) in live.iter().filter(|(id, _)| !desired.contains(id)) {
        let decision = if !inventory.contains(id) {
            PruneDecision::Keep(KeepReason::NotInInventory)
        } else if !is_tracked_by(object, app, id) {
            PruneDecision::Keep(KeepReason::NotTracked)
        } else if opted_out(object) {
            PruneDecision::Keep(KeepReason::OptedOut)
        } else if is_adopted(object) && !options.prune_adopted {
            PruneDecision::Keep(KeepReason::Adopted)
        } else if !options.prune {
            PruneDecision::Keep(KeepReason::PruneDisabled)
        } else {
            PruneDecision::Delete
        };
        plan.orphans.push((id.clone(), decision));
    }
    let would_delete = plan.deletions().count();
    if would_delete == 0 || options.allow_mass_prune {
        return plan;
    }
    plan.breaker = if desired.is_empty() {
        Some(Breaker::EmptyRender {
            inventory: inventory.len(),
        })
    } else if would_delete as f64 > options.max_share * inventory.len() as f64 {
        Some(Breaker::MassPrune {
            would_delete,
            inventory: inventory.len(),
            max_share: options.max_share,
        })
    } else {
        None
    };
    if plan.breaker.is_some() {
        for (_, decision) in &mut plan.orphans {
            if *decision == PruneDecision::Delete {
                *decision = PruneDecision::Keep(KeepReason::CircuitBreaker);
            }
        }
    }
    plan
}

fn opted_out(object: &Value) -> bool {
    object
        .pointer("/metadata/annotations")
        .and_then(|annotations| annotations.get(PRUNE_ANNOTATION))
        .and_then(Value::as_str)
        == Some(PRUNE_DISABLED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fate_reads_back_as_it_was_written() {
        let fates = [
            PruneFate::Deleted,
            PruneFate::kept(&KeepReason::OptedOut),
            PruneFate::deletion_failed("forbidden"),
        ];
        for fate in fates {
            let json = serde_json::to_value(&fate).unwrap();
            assert_eq!(json, serde_json::json!(fate.to_string()));
            assert_eq!(serde_json::from_value::<PruneFate>(json).unwrap(), fate);
        }
        assert_eq!(
            PruneFate::deletion_failed("forbidden").to_string(),
            "kept: deletion failed: forbidden"
        );
    }
}
