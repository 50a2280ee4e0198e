//! Other writers of a managed object, on one YAML fixture per case
//! (`tests/fixtures/other_writers/<test name>.yaml`): `live`, and `expect`,
//! the writers `other_writers` must list, in order, each with `manager`,
//! `operation`, optional `subresource` and `time`, `fields` and `paths`
//! (compared as a set).

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;
use tether_core::attribution::other_writers;

#[derive(Deserialize)]
struct Fixture {
    live: Value,
    expect: Vec<Value>,
}

fn check(name: &str) {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("tests/fixtures/other_writers/{name}.yaml"));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let fixture: Fixture =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let found: Vec<Value> = other_writers(&fixture.live)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .iter()
        .map(|writer| sorted_paths(serde_json::to_value(writer).unwrap()))
        .collect();
    let expected: Vec<Value> = fixture.expect.into_iter().map(sorted_paths).collect();
    assert_eq!(
        found,
        expected,
        "{name}: found {}",
        serde_json::to_string_pretty(&found).unwrap()
    );
}

fn sorted_paths(mut writer: Value) -> Value {
    if let Some(paths) = writer.get_mut("paths").and_then(Value::as_array_mut) {
        paths.sort_by_key(ToString::to_string);
    }
    writer
}

#[test]
fn a_deployment_only_tether_and_kubernetes_wrote_has_no_other_writer() {
    check("a_deployment_only_tether_and_kubernetes_wrote_has_no_other_writer");
}

#[test]
fn kubectl_scale_patch_and_edit_are_other_writers_newest_first() {
    check("kubectl_scale_patch_and_edit_are_other_writers_newest_first");
}

#[test]
fn a_writer_whose_fields_are_gone_or_taken_back_is_not_listed() {
    check("a_writer_whose_fields_are_gone_or_taken_back_is_not_listed");
}

#[test]
fn client_side_apply_and_before_first_apply_are_other_writers() {
    check("client_side_apply_and_before_first_apply_are_other_writers");
}
