//! Sync hooks against fixtures: one YAML file per case under
//! `fixtures/hooks/`, holding a rendered set (`objects`, as Argo CD, Helm
//! or Tether annotate them) and what the plan must be (`expected`: the
//! ordinary objects, each phase's hooks in run order as
//! `Kind/name weight policies`, and the notes on objects not applied).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use tether_core::ObjectRef;
use tether_core::hook::{HookPhase, plan};

#[derive(Deserialize)]
struct Case {
    objects: Vec<Value>,
    expected: BTreeMap<String, Vec<String>>,
}

fn identified(objects: &[Value]) -> Vec<(ObjectRef, Value)> {
    objects
        .iter()
        .map(|object| {
            let mut object = object.clone();
            object["metadata"]["namespace"] = "shop".into();
            // A generateName stands in for the name until the API server names it.
            if object.pointer("/metadata/name").is_none() {
                object["metadata"]["name"] = object["metadata"]["generateName"].clone();
            }
            (ObjectRef::from_object(&object).unwrap(), object)
        })
        .collect()
}

fn actual(objects: &[(ObjectRef, Value)]) -> BTreeMap<String, Vec<String>> {
    let plan = plan(objects).unwrap();
    let mut actual = BTreeMap::new();
    let short = |id: &ObjectRef| format!("{}/{}", id.kind, id.name);
    actual.insert(
        "resources".into(),
        plan.resources
            .iter()
            .map(|&i| short(&objects[i].0))
            .collect(),
    );
    for phase in HookPhase::ALL {
        let hooks = plan
            .phase(*phase)
            .map(|planned| {
                let policies: Vec<&str> = planned
                    .hook
                    .delete_policies
                    .iter()
                    .map(|p| p.as_str())
                    .collect();
                format!(
                    "{} {} {}",
                    short(&planned.id),
                    planned.hook.weight,
                    policies.join(",")
                )
            })
            .collect();
        actual.insert(phase.as_str().to_string(), hooks);
    }
    actual.insert(
        "notes".into(),
        plan.notes.iter().map(ToString::to_string).collect(),
    );
    actual
}

#[test]
fn every_hook_fixture_plans_as_expected() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hooks");
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 3, "fixtures missing in {}", folder.display());
    let mut mismatches = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let case: Case = serde_saphyr::from_str(&text)
            .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
        let got = actual(&identified(&case.objects));
        if got != case.expected {
            mismatches.push(format!(
                "{}:\n  expected {:?}\n  got      {:?}",
                file.display(),
                case.expected,
                got
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
