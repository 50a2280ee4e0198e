//! The prune decision: only what Tether created for the app, never in bulk
//! by accident.

use serde_json::{Value, json};
use tether_core::ObjectRef;
use tether_core::ownership::mark_adopted;
use tether_core::prune::{Breaker, KeepReason, PruneDecision, PruneOptions, PrunePlan, plan_prune};
use tether_core::tracking::{AppRef, stamp};

fn config_map(name: &str) -> (ObjectRef, Value) {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "shop"}});
    (ObjectRef::from_object(&object).unwrap(), object)
}

fn tracked(app: &AppRef, name: &str) -> (ObjectRef, Value) {
    let (id, mut object) = config_map(name);
    stamp(&mut object, app, &id);
    (id, object)
}

fn ids(objects: &[(ObjectRef, Value)]) -> Vec<ObjectRef> {
    objects.iter().map(|(id, _)| id.clone()).collect()
}

fn live(objects: &[(ObjectRef, Value)]) -> Vec<(ObjectRef, &Value)> {
    objects
        .iter()
        .map(|(id, object)| (id.clone(), object))
        .collect()
}

/// The plan for an app whose inventory is all of `objects` (all live) and
/// whose desired state is the first `kept` of them.
fn plan_kept(
    app: &AppRef,
    objects: &[(ObjectRef, Value)],
    kept: usize,
    options: &PruneOptions,
) -> PrunePlan {
    plan_prune(
        app,
        &ids(objects),
        &ids(&objects[..kept]),
        &live(objects),
        options,
    )
}

const PRUNE: PruneOptions = PruneOptions {
    prune: true,
    max_share: 0.5,
    allow_mass_prune: false,
    prune_adopted: false,
};

#[test]
fn an_orphan_is_reported_but_kept_when_prune_is_off() {
    let app = AppRef::new("tether", "shop");
    let objects = [tracked(&app, "a"), tracked(&app, "b"), tracked(&app, "c")];
    let plan = plan_kept(&app, &objects, 2, &PruneOptions::default());
    assert_eq!(
        plan.orphans,
        [(
            objects[2].0.clone(),
            PruneDecision::Keep(KeepReason::PruneDisabled)
        )]
    );
    assert_eq!(plan.breaker, None);
}

#[test]
fn a_tracked_orphan_in_the_inventory_is_deleted_when_prune_is_on() {
    let app = AppRef::new("tether", "shop");
    let objects = [tracked(&app, "a"), tracked(&app, "b"), tracked(&app, "c")];
    let plan = plan_kept(&app, &objects, 2, &PRUNE);
    assert_eq!(plan.deletions().collect::<Vec<_>>(), [&objects[2].0]);
}

#[test]
fn an_object_with_matching_labels_that_tether_did_not_create_is_never_deleted() {
    let app = AppRef::new("tether", "shop");
    let mut objects = vec![tracked(&app, "a"), tracked(&app, "b"), tracked(&app, "c")];
    let (id, mut lookalike) = config_map("lookalike");
    lookalike["metadata"]["labels"] = json!({"tether.dev/app": app.label_value()});
    objects.push((id.clone(), lookalike));
    let (copied, mut stray) = tracked(&app, "stray");
    stray["metadata"]["annotations"] = json!({});
    objects.push((copied.clone(), stray));
    let mut inventory = ids(&objects[..3]);
    inventory.push(copied.clone());
    let plan = plan_prune(
        &app,
        &inventory,
        &ids(&objects[..3]),
        &live(&objects),
        &PRUNE,
    );
    assert_eq!(
        plan.orphans,
        [
            (id, PruneDecision::Keep(KeepReason::NotInInventory)),
            (copied, PruneDecision::Keep(KeepReason::NotTracked)),
        ]
    );
}

#[test]
fn an_object_annotated_prune_disabled_is_kept() {
    let app = AppRef::new("tether", "shop");
    let mut objects = vec![tracked(&app, "a"), tracked(&app, "b"), tracked(&app, "c")];
    objects[2].1["metadata"]["annotations"]["tether.dev/prune"] = json!("disabled");
    let plan = plan_kept(&app, &objects, 2, &PRUNE);
    assert_eq!(plan.orphans[0].1, PruneDecision::Keep(KeepReason::OptedOut));
}

#[test]
fn an_object_another_app_took_over_after_a_rename_is_not_deleted() {
    let (old, new) = (
        AppRef::new("tether", "shop"),
        AppRef::new("tether", "shop-v2"),
    );
    let objects = [tracked(&old, "a"), tracked(&new, "b"), tracked(&old, "c")];
    let plan = plan_kept(&old, &objects, 1, &PRUNE);
    assert_eq!(
        plan.orphans[0],
        (
            objects[1].0.clone(),
            PruneDecision::Keep(KeepReason::NotTracked)
        )
    );
    assert_eq!(plan.deletions().collect::<Vec<_>>(), [&objects[2].0]);
}

#[test]
fn an_empty_render_deletes_nothing_until_confirmed() {
    let app = AppRef::new("tether", "shop");
    let objects = [tracked(&app, "a")];
    let plan = plan_prune(&app, &ids(&objects), &[], &live(&objects), &PRUNE);
    assert_eq!(plan.breaker, Some(Breaker::EmptyRender { inventory: 1 }));
    assert_eq!(
        plan.orphans[0].1,
        PruneDecision::Keep(KeepReason::CircuitBreaker)
    );
    assert!(
        plan.breaker
            .unwrap()
            .to_string()
            .contains("--allow-mass-prune")
    );
    let confirmed = PruneOptions {
        allow_mass_prune: true,
        ..PRUNE
    };
    let plan = plan_prune(&app, &ids(&objects), &[], &live(&objects), &confirmed);
    assert_eq!(plan.deletions().count(), 1);
}

#[test]
fn deleting_more_than_half_the_inventory_trips_the_breaker_and_half_does_not() {
    let app = AppRef::new("tether", "shop");
    let objects = [
        tracked(&app, "a"),
        tracked(&app, "b"),
        tracked(&app, "c"),
        tracked(&app, "d"),
    ];
    let half = plan_kept(&app, &objects, 2, &PRUNE);
    assert_eq!((half.deletions().count(), half.breaker), (2, None));
    let most = plan_kept(&app, &objects, 1, &PRUNE);
    assert_eq!(
        most.breaker,
        Some(Breaker::MassPrune {
            would_delete: 3,
            inventory: 4,
            max_share: 0.5
        })
    );
    assert_eq!(most.deletions().count(), 0);
}

#[test]
fn inventory_entries_already_gone_are_listed_for_removal_from_the_inventory() {
    let app = AppRef::new("tether", "shop");
    let objects = [tracked(&app, "a"), tracked(&app, "b")];
    let plan = plan_prune(
        &app,
        &ids(&objects),
        &ids(&objects[..1]),
        &live(&objects[..1]),
        &PRUNE,
    );
    assert_eq!(plan.gone, [objects[1].0.clone()]);
    assert!(plan.orphans.is_empty());
}

#[test]
fn an_adopted_object_is_deleted_only_when_the_app_prunes_adopted_objects() {
    let app = AppRef::new("tether", "shop");
    let mut objects = [
        tracked(&app, "a"),
        tracked(&app, "b"),
        tracked(&app, "victim"),
    ];
    mark_adopted(&mut objects[2].1);
    let plan = plan_kept(&app, &objects, 2, &PRUNE);
    assert_eq!(
        plan.orphans,
        [(
            objects[2].0.clone(),
            PruneDecision::Keep(KeepReason::Adopted)
        )]
    );
    let opted_in = PruneOptions {
        prune_adopted: true,
        ..PRUNE
    };
    let plan = plan_kept(&app, &objects, 2, &opted_in);
    assert_eq!(plan.deletions().collect::<Vec<_>>(), [&objects[2].0]);
}
