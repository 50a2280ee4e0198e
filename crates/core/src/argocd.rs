//! Argo CD's annotations (`argocd.argoproj.io/*`) on objects in Git, read
//! the way someone coming from Argo CD expects: acted on, or said to be
//! ignored, never ignored silently.
//!
//! - `sync-wave` is an alias of `tether.dev/sync-wave` (read by
//!   [`crate::order::sync_wave`]); when both are set and differ, Tether's
//!   wins and that is a warning.
//! - `hook` and `hook-delete-policy`: the object is a sync hook, run as
//!   Argo CD runs it ([`crate::hook`]); hooks are taken out of the set
//!   before this review, and one given to it anyway is withheld (never
//!   applied as an ordinary object, which would run it at the wrong time).
//! - every other one (`sync-options`, `compare-options`, …) is not acted
//!   on: a warning says it is ignored.

use std::fmt;

use serde_json::Value;

use crate::object::ObjectRef;
use crate::order::SYNC_WAVE_ANNOTATION as TETHER_SYNC_WAVE;

/// The prefix of every Argo CD annotation.
pub const PREFIX: &str = "argocd.argoproj.io/";
/// Argo CD's sync wave, an alias of `tether.dev/sync-wave`.
pub const SYNC_WAVE_ANNOTATION: &str = "argocd.argoproj.io/sync-wave";
/// Argo CD's resource hook (`PreSync`, `Sync`, `PostSync`, `SyncFail`, `Skip`).
pub const HOOK_ANNOTATION: &str = "argocd.argoproj.io/hook";

/// What to do instead, for annotations that have a Tether equivalent.
const HINTS: &[(&str, &str)] = &[
    (
        "argocd.argoproj.io/compare-options",
        "list the fields to ignore in spec.ignoreDifferences",
    ),
    (
        "argocd.argoproj.io/sync-options",
        "for Prune=false annotate the object tether.dev/prune: disabled",
    ),
];

/// Annotation values are shown at most this long.
const VALUE_SHOWN: usize = 60;

/// One Argo CD annotation Tether does not act on as Argo CD would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub object: ObjectRef,
    pub annotation: String,
    /// What Tether does instead, after the annotation and its value.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} {}", self.object, self.annotation, self.message)
    }
}

/// What Tether makes of one object's Argo CD annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Review {
    /// Not applied: Argo CD would run it only as a hook.
    pub withheld: bool,
    pub warnings: Vec<Warning>,
}

/// Reviews the Argo CD annotations of `object` (identity `id`).
pub fn review(id: &ObjectRef, object: &Value) -> Review {
    let Some(annotations) = object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    else {
        return Review::default();
    };
    let warning = |annotation: &str, message: String| Warning {
        object: id.clone(),
        annotation: annotation.to_string(),
        message,
    };
    if annotations.contains_key(HOOK_ANNOTATION) {
        return Review {
            withheld: true,
            warnings: Vec::new(),
        };
    }
    let mut keys: Vec<&String> = annotations
        .keys()
        .filter(|key| key.starts_with(PREFIX))
        .collect();
    keys.sort();
    let mut warnings = Vec::new();
    for key in keys {
        let value = &annotations[key.as_str()];
        if key == crate::hook::ARGOCD_DELETE_POLICY_ANNOTATION {
            continue;
        }
        if key == SYNC_WAVE_ANNOTATION {
            if let Some(tethers) = annotations.get(TETHER_SYNC_WAVE)
                && wave(tethers) != wave(value)
            {
                let message = format!(
                    "{} differs from {TETHER_SYNC_WAVE} {}; Tether's wins",
                    shown(value),
                    shown(tethers)
                );
                warnings.push(warning(key, message));
            }
            continue;
        }
        let mut message = format!("{} is not supported; ignored", shown(value));
        if let Some((_, hint)) = HINTS.iter().find(|(annotation, _)| annotation == key) {
            message = format!("{message} ({hint})");
        }
        warnings.push(warning(key, message));
    }
    Review {
        withheld: false,
        warnings,
    }
}

/// A wave as written, compared by number when it is one.
fn wave(value: &Value) -> Result<i32, String> {
    match value {
        Value::String(text) => text.trim().parse().map_err(|_| text.clone()),
        other => Err(other.to_string()),
    }
}

fn shown(value: &Value) -> String {
    let text = match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let mut cut: String = text.chars().take(VALUE_SHOWN).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(annotations: Value) -> (ObjectRef, Value) {
        let object = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "migrate", "namespace": "shop", "annotations": annotations}});
        (ObjectRef::from_object(&object).unwrap(), object)
    }

    fn messages(review: &Review) -> Vec<String> {
        review.warnings.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_hook_is_never_applied_as_an_ordinary_object_and_is_no_warning() {
        let (id, object) = job(json!({HOOK_ANNOTATION: "PreSync",
            "argocd.argoproj.io/hook-delete-policy": "HookSucceeded"}));
        let review = review(&id, &object);
        assert!(review.withheld);
        assert!(review.warnings.is_empty(), "{:?}", review.warnings);
    }

    #[test]
    fn an_argo_cd_sync_wave_alone_or_agreeing_with_tethers_is_no_warning() {
        let (id, object) = job(json!({SYNC_WAVE_ANNOTATION: "2"}));
        assert_eq!(review(&id, &object), Review::default());
        let (id, object) = job(json!({SYNC_WAVE_ANNOTATION: "2", TETHER_SYNC_WAVE: " 2"}));
        assert_eq!(review(&id, &object), Review::default());
    }

    #[test]
    fn a_sync_wave_that_disagrees_with_tethers_is_a_warning_that_tethers_wins() {
        let (id, object) = job(json!({SYNC_WAVE_ANNOTATION: "2", TETHER_SYNC_WAVE: "1"}));
        let review = review(&id, &object);
        assert!(!review.withheld);
        assert_eq!(
            messages(&review),
            [
                "Job shop/migrate: argocd.argoproj.io/sync-wave \"2\" differs from \
              tether.dev/sync-wave \"1\"; Tether's wins"
            ]
        );
    }

    #[test]
    fn other_argo_cd_annotations_are_applied_around_with_a_warning_and_a_hint() {
        let (id, object) = job(json!({"argocd.argoproj.io/sync-options": "Prune=false",
            "argocd.argoproj.io/compare-options": "IgnoreExtraneous",
            "example.com/other": "x"}));
        let review = review(&id, &object);
        assert!(!review.withheld);
        assert_eq!(
            messages(&review),
            [
                "Job shop/migrate: argocd.argoproj.io/compare-options \"IgnoreExtraneous\" is \
                 not supported; ignored (list the fields to ignore in spec.ignoreDifferences)",
                "Job shop/migrate: argocd.argoproj.io/sync-options \"Prune=false\" is not \
                 supported; ignored (for Prune=false annotate the object tether.dev/prune: \
                 disabled)"
            ]
        );
    }

    #[test]
    fn a_long_value_is_cut() {
        let (id, object) = job(json!({"argocd.argoproj.io/x": "a".repeat(200)}));
        let message = &review(&id, &object).warnings[0].message;
        assert!(message.len() < 120, "{message}");
    }
}
