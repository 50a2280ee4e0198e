//! Which live objects an Application may take: the guard that keeps one app
//! from taking over another app's objects, or objects nobody gave it.
//!
//! Before a commit is applied, every object it declares is admitted:
//!
//! - absent, or carrying this app's tracking annotation, or in this app's
//!   inventory: the app's own, applied;
//! - carrying another app's tracking annotation: a conflict, unless that app
//!   has released it (it no longer exists, or no longer declares it);
//! - existing without Tether's marks (made by hand, by another tool): adopted
//!   only when the app opts in (`syncPolicy.adoptExisting`, or the
//!   annotation `tether.dev/adopt: "true"` on the object in Git), and then
//!   marked [`ADOPTED_ANNOTATION`] so prune never deletes it unless the app
//!   opts in again (`syncPolicy.pruneAdopted`);
//! - namespaced, in a namespace the destination does not allow: refused.
//!
//! Any refusal refuses the whole commit: nothing of it is applied.

use std::fmt;

use serde_json::Value;

use crate::object::{ObjectRef, annotate};
use crate::tracking::{AppRef, TRACKING_ANNOTATION};

/// Per-object opt-in, in Git: `tether.dev/adopt: "true"` lets the app take
/// over this object if it exists already.
pub const ADOPT_ANNOTATION: &str = "tether.dev/adopt";
/// Set by Tether on an object it adopted (it existed before Tether applied
/// it); such an object is never pruned unless the app opts in.
pub const ADOPTED_ANNOTATION: &str = "tether.dev/adopted";

/// Who holds a live object, as its marks say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// Absent, or this app's own.
    ThisApp,
    /// Another Application's (by its tracking annotation).
    OtherApp(AppRef),
    /// Exists, with no Tether tracking annotation: not Tether's.
    Nobody,
}

/// Who holds `live` (the live copy of object `id`, if any) for `app`, whose
/// inventory says whether Tether applied it for this app before.
pub fn holder(app: &AppRef, live: Option<&Value>, in_inventory: bool) -> Holder {
    let Some(live) = live else {
        return Holder::ThisApp;
    };
    match tracked_app(live) {
        Some(owner) if owner == *app => Holder::ThisApp,
        Some(owner) => Holder::OtherApp(owner),
        None if in_inventory => Holder::ThisApp,
        None => Holder::Nobody,
    }
}

/// The Application named by an object's tracking annotation
/// (`namespace/name:group/kind:namespace/name`).
pub fn tracked_app(object: &Value) -> Option<AppRef> {
    let annotation = annotation(object, TRACKING_ANNOTATION)?;
    let (app, _) = annotation.split_once(':')?;
    let (namespace, name) = app.split_once('/')?;
    (!namespace.is_empty() && !name.is_empty()).then(|| AppRef::new(namespace, name))
}

/// Whether `object` (live) carries [`ADOPTED_ANNOTATION`].
pub fn is_adopted(object: &Value) -> bool {
    annotation(object, ADOPTED_ANNOTATION) == Some("true")
}

/// Marks `object` (desired) as adopted, so the mark is kept by every apply.
pub fn mark_adopted(object: &mut Value) {
    annotate(object, ADOPTED_ANNOTATION, "true");
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object.pointer("/metadata/annotations")?.get(key)?.as_str()
}

/// One object a commit declares, as admission sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub id: &'a ObjectRef,
    /// The object as Git declares it.
    pub desired: &'a Value,
    /// The live object, if it exists.
    pub live: Option<&'a Value>,
    /// In this app's inventory (Tether applied it for this app before).
    pub in_inventory: bool,
    /// Its namespace is the destination or one it allows (always true for
    /// cluster-scoped objects).
    pub namespace_allowed: bool,
}

/// Why an object of a commit may not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Another Application manages it and has not released it.
    OtherApp { object: ObjectRef, owner: AppRef },
    /// It exists and Tether did not create it; the app did not opt in.
    NotAdoptable { object: ObjectRef },
    /// It is in a namespace the destination does not allow.
    Namespace { object: ObjectRef },
    /// Whether it exists, and who holds it, could not be read.
    Unreadable { object: ObjectRef, reason: String },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::OtherApp { object, owner } => write!(
                f,
                "{object} is managed by Application {}/{}; remove it there first",
                owner.namespace, owner.name
            ),
            Refusal::NotAdoptable { object } => write!(
                f,
                "{object} exists and Tether did not create it; to take it over set \
                 syncPolicy.adoptExisting or annotate it {ADOPT_ANNOTATION}: \"true\" in Git"
            ),
            Refusal::Namespace { object } => write!(
                f,
                "{object} is outside the destination namespace; list its namespace in \
                 destination.allowNamespaces"
            ),
            Refusal::Unreadable { object, reason } => {
                write!(f, "{object}: could not read who holds it: {reason}")
            }
        }
    }
}

/// What admission decided for a commit it let through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admitted {
    /// Objects to apply with [`ADOPTED_ANNOTATION`]: taken over now, or
    /// adopted before.
    pub adopted: Vec<ObjectRef>,
}

/// Admits the objects of one commit for `app`. `adopt_existing` is the
/// app's `syncPolicy.adoptExisting`; `released(owner, id)` says whether
/// another app `owner` has let go of `id`. Every refusal is returned: one
/// is enough to refuse the commit.
pub fn admit(
    app: &AppRef,
    candidates: &[Candidate<'_>],
    adopt_existing: bool,
    released: impl Fn(&AppRef, &ObjectRef) -> bool,
) -> Result<Admitted, Vec<Refusal>> {
    let mut admitted = Admitted::default();
    let mut refusals = Vec::new();
    for candidate in candidates {
        let object = candidate.id.clone();
        if !candidate.namespace_allowed {
            refusals.push(Refusal::Namespace { object });
            continue;
        }
        match holder(app, candidate.live, candidate.in_inventory) {
            Holder::ThisApp => {
                if candidate.live.is_some_and(is_adopted) {
                    admitted.adopted.push(object);
                }
            }
            Holder::OtherApp(owner) if released(&owner, &object) => {}
            Holder::OtherApp(owner) => refusals.push(Refusal::OtherApp { object, owner }),
            Holder::Nobody => {
                let opted_in = adopt_existing
                    || annotation(candidate.desired, ADOPT_ANNOTATION) == Some("true");
                if opted_in {
                    admitted.adopted.push(object);
                } else {
                    refusals.push(Refusal::NotAdoptable { object });
                }
            }
        }
    }
    if refusals.is_empty() {
        Ok(admitted)
    } else {
        Err(refusals)
    }
}

/// Whether a namespaced object in `namespace` may belong to an app whose
/// destination is `destination` and which also allows `allowed`.
pub fn namespace_allowed(namespace: Option<&str>, destination: &str, allowed: &[String]) -> bool {
    match namespace {
        None => true,
        Some(namespace) => namespace == destination || allowed.iter().any(|a| a == namespace),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tracking::stamp;

    fn config_map(namespace: &str, name: &str) -> (ObjectRef, Value) {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": {"a": "1"}});
        (ObjectRef::from_object(&object).unwrap(), object)
    }

    fn candidate<'a>(
        id: &'a ObjectRef,
        desired: &'a Value,
        live: Option<&'a Value>,
    ) -> Candidate<'a> {
        Candidate {
            id,
            desired,
            live,
            in_inventory: false,
            namespace_allowed: true,
        }
    }

    fn never(_: &AppRef, _: &ObjectRef) -> bool {
        false
    }

    #[test]
    fn an_object_another_app_manages_is_a_conflict_naming_both() {
        let (alice, bob) = (AppRef::new("team-a", "alice"), AppRef::new("team-b", "bob"));
        let (id, desired) = config_map("team-b", "bob-config");
        let mut live = desired.clone();
        stamp(&mut live, &bob, &id);
        let refused = admit(
            &alice,
            &[candidate(&id, &desired, Some(&live))],
            false,
            never,
        )
        .unwrap_err();
        assert_eq!(
            refused,
            [Refusal::OtherApp {
                object: id.clone(),
                owner: bob.clone()
            }]
        );
        assert!(
            refused[0].to_string().contains("team-b/bob"),
            "{}",
            refused[0]
        );
        // Once bob has let go (deleted, or no longer declares it), alice may take it.
        let admitted = admit(
            &alice,
            &[candidate(&id, &desired, Some(&live))],
            false,
            |o, _| *o == bob,
        );
        assert_eq!(admitted.unwrap(), Admitted::default());
    }

    #[test]
    fn an_object_made_by_hand_is_adopted_only_when_the_app_opts_in() {
        let app = AppRef::new("team-a", "shop");
        let (id, desired) = config_map("team-a", "victim");
        let live = desired.clone();
        let refused = admit(&app, &[candidate(&id, &desired, Some(&live))], false, never);
        assert_eq!(
            refused.unwrap_err(),
            [Refusal::NotAdoptable { object: id.clone() }]
        );
        let by_policy = admit(&app, &[candidate(&id, &desired, Some(&live))], true, never);
        assert_eq!(by_policy.unwrap().adopted, std::slice::from_ref(&id));
        let mut annotated = desired.clone();
        annotated["metadata"]["annotations"] = json!({ADOPT_ANNOTATION: "true"});
        let by_annotation = admit(
            &app,
            &[candidate(&id, &annotated, Some(&live))],
            false,
            never,
        );
        assert_eq!(by_annotation.unwrap().adopted, [id]);
    }

    #[test]
    fn an_adopted_object_stays_adopted_and_a_created_one_never_is() {
        let app = AppRef::new("team-a", "shop");
        let (id, desired) = config_map("team-a", "web");
        let created = admit(&app, &[candidate(&id, &desired, None)], false, never).unwrap();
        assert!(created.adopted.is_empty());
        let mut live = desired.clone();
        stamp(&mut live, &app, &id);
        mark_adopted(&mut live);
        assert!(is_adopted(&live));
        let again = admit(&app, &[candidate(&id, &desired, Some(&live))], false, never).unwrap();
        assert_eq!(again.adopted, [id]);
    }

    #[test]
    fn an_object_of_the_inventory_whose_marks_were_removed_is_still_the_apps() {
        let app = AppRef::new("team-a", "shop");
        let (id, desired) = config_map("team-a", "web");
        let mut entry = candidate(&id, &desired, Some(&desired));
        entry.in_inventory = true;
        assert!(admit(&app, &[entry], false, never).is_ok());
    }

    #[test]
    fn an_object_outside_the_destination_namespace_is_refused() {
        let app = AppRef::new("team-a", "shop");
        let (id, desired) = config_map("kube-system", "victim");
        let allowed = namespace_allowed(id.namespace.as_deref(), "team-a", &[]);
        assert!(!allowed);
        let mut entry = candidate(&id, &desired, None);
        entry.namespace_allowed = allowed;
        let refused = admit(&app, &[entry], true, never).unwrap_err();
        assert_eq!(refused, [Refusal::Namespace { object: id }]);
        assert!(namespace_allowed(
            Some("kube-system"),
            "team-a",
            &["kube-system".into()]
        ));
        assert!(namespace_allowed(None, "team-a", &[]));
    }

    #[test]
    fn only_a_whole_tracking_annotation_names_an_app() {
        let object =
            |value: &str| json!({"metadata": {"annotations": {TRACKING_ANNOTATION: value}}});
        assert_eq!(
            tracked_app(&object("team-b/bob:/ConfigMap:team-b/x")),
            Some(AppRef::new("team-b", "bob"))
        );
        assert_eq!(tracked_app(&object("garbage")), None);
        assert_eq!(tracked_app(&object("/bob:x")), None);
        assert_eq!(tracked_app(&json!({"metadata": {}})), None);
    }
}
