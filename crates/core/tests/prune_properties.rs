//! Prune's promises as properties, over random inventories, desired sets
//! and live objects (tracked by this app, by another, by none; opted out;
//! adopted): prune never selects an object without Tether's ownership
//! proof, never one still desired or outside the inventory, never one that
//! opted out or was adopted (unless adopted objects may go), nothing when
//! prune is off, and never more than the circuit breaker allows.

use proptest::prelude::*;
use serde_json::{Value, json};
use tether_core::ObjectRef;
use tether_core::ownership::mark_adopted;
use tether_core::prune::{
    PRUNE_ANNOTATION, PRUNE_DISABLED, PruneDecision, PruneOptions, plan_prune,
};
use tether_core::tracking::{AppRef, is_tracked_by, stamp};

const NAMES: [&str; 10] = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];

/// Who marked a live object as theirs.
#[derive(Debug, Clone, Copy)]
enum Mark {
    ThisApp,
    OtherApp,
    Nobody,
    /// This app's label, another app's tracking id (a copied object).
    Forged,
}

#[derive(Debug, Clone)]
struct World {
    inventory: Vec<usize>,
    desired: Vec<usize>,
    live: Vec<(usize, Mark, bool, bool)>,
    options: PruneOptions,
}

fn config_map(name: &str) -> (ObjectRef, Value) {
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "shop"}});
    (ObjectRef::from_object(&object).unwrap(), object)
}

fn world() -> impl Strategy<Value = World> {
    let subset = || prop::collection::btree_set(0..NAMES.len(), 0..NAMES.len());
    let mark = prop_oneof![
        Just(Mark::ThisApp),
        Just(Mark::OtherApp),
        Just(Mark::Nobody),
        Just(Mark::Forged)
    ];
    let live = prop::collection::btree_map(
        0..NAMES.len(),
        (mark, any::<bool>(), any::<bool>()),
        0..NAMES.len(),
    );
    let options = (any::<bool>(), 0.0..=1.0f64, any::<bool>(), any::<bool>()).prop_map(
        |(prune, max_share, allow_mass_prune, prune_adopted)| PruneOptions {
            prune,
            max_share,
            allow_mass_prune,
            prune_adopted,
        },
    );
    (subset(), subset(), live, options).prop_map(|(inventory, desired, live, options)| World {
        inventory: inventory.into_iter().collect(),
        desired: desired.into_iter().collect(),
        live: live
            .into_iter()
            .map(|(n, (mark, opted_out, adopted))| (n, mark, opted_out, adopted))
            .collect(),
        options,
    })
}

proptest! {
    // 2,000 cases in the suite; scripts/fuzz.sh sets PROPTEST_CASES.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(2000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn prune_deletes_only_what_this_app_provably_owns_and_never_more_than_the_breaker_allows(world in world()) {
        let app = AppRef::new("shop", "web");
        let other = AppRef::new("shop", "other");
        let id = |n: usize| config_map(NAMES[n]).0;
        let inventory: Vec<ObjectRef> = world.inventory.iter().map(|&n| id(n)).collect();
        let desired: Vec<ObjectRef> = world.desired.iter().map(|&n| id(n)).collect();
        let objects: Vec<(ObjectRef, Value)> = world
            .live
            .iter()
            .map(|&(n, mark, opted_out, adopted)| {
                let (id, mut object) = config_map(NAMES[n]);
                match mark {
                    Mark::ThisApp => stamp(&mut object, &app, &id),
                    Mark::OtherApp => stamp(&mut object, &other, &id),
                    Mark::Nobody => {}
                    Mark::Forged => {
                        stamp(&mut object, &other, &id);
                        object["metadata"]["labels"][tether_core::tracking::APP_LABEL] =
                            json!(app.label_value());
                    }
                }
                if opted_out {
                    object["metadata"]["annotations"][PRUNE_ANNOTATION] = json!(PRUNE_DISABLED);
                }
                if adopted {
                    mark_adopted(&mut object);
                }
                (id, object)
            })
            .collect();
        let live: Vec<(ObjectRef, &Value)> =
            objects.iter().map(|(id, object)| (id.clone(), object)).collect();
        let plan = plan_prune(&app, &inventory, &desired, &live, &world.options);

        let deleted: Vec<&ObjectRef> = plan
            .orphans
            .iter()
            .filter(|(_, decision)| *decision == PruneDecision::Delete)
            .map(|(id, _)| id)
            .collect();
        for id in &deleted {
            let object = &objects.iter().find(|(found, _)| found == *id).unwrap().1;
            prop_assert!(is_tracked_by(object, &app, id), "{id} deleted without this app's tracking id");
            prop_assert!(inventory.contains(id), "{id} deleted but never applied");
            prop_assert!(!desired.contains(id), "{id} deleted while still desired");
            let &(_, _, opted_out, adopted) =
                world.live.iter().find(|(n, ..)| config_map(NAMES[*n]).0 == **id).unwrap();
            prop_assert!(!opted_out, "{id} deleted although it opted out");
            prop_assert!(!adopted || world.options.prune_adopted, "{id} adopted and deleted");
        }
        prop_assert!(world.options.prune || deleted.is_empty(), "deleted with prune off");
        if !world.options.allow_mass_prune && !deleted.is_empty() {
            prop_assert!(!desired.is_empty(), "an empty render deleted {deleted:?}");
            prop_assert!(
                deleted.len() as f64 <= world.options.max_share * inventory.len() as f64,
                "{} deleted of an inventory of {} (max share {})",
                deleted.len(), inventory.len(), world.options.max_share
            );
        }
    }
}
