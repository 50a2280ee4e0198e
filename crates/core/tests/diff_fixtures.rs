//! Diff and attribution on one YAML fixture per case
//! (`tests/fixtures/diff/<test name>.yaml`).
//!
//! A fixture has `live`, and `dry_run` (compared with `diff`) and/or
//! `manifest` (compared with `diff_manifest` as manager `tether`), optional
//! `ignore` rules, and `expect`: the differing fields both comparisons must
//! report, each with its `path` and, where given, `pointer`, `desired`,
//! `live` (null: absent) and `writer` (null: none).

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;
use tether_core::attribution::{Ownership, Writer};
use tether_core::diff::{Diff, IgnoreRule, SecretMask, diff, diff_manifest};

/// The key Secret values are masked with in the fixtures' expectations.
const MASK: SecretMask<'static> = SecretMask::Keyed(b"fixture key");

#[derive(Deserialize)]
struct Fixture {
    live: Value,
    dry_run: Option<Value>,
    manifest: Option<Value>,
    #[serde(default)]
    ignore: Vec<IgnoreRule>,
    expect: Vec<Expected>,
}

#[derive(Deserialize)]
struct Expected {
    path: String,
    pointer: Option<String>,
    #[serde(default, deserialize_with = "present")]
    desired: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    live: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    writer: Option<Value>,
}

/// Tells a key written as `null` (`Some(Null)`) from a key left out (`None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn check(name: &str) {
    let file =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/diff/{name}.yaml"));
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let fixture: Fixture =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut compared = 0;
    if let Some(dry_run) = &fixture.dry_run {
        let result = diff(dry_run, &fixture.live, &fixture.ignore, MASK).unwrap();
        assert_matches(&format!("{name} (dry-run)"), &result, &fixture);
        compared += 1;
    }
    if let Some(manifest) = &fixture.manifest {
        let result =
            diff_manifest(manifest, &fixture.live, &fixture.ignore, "tether", MASK).unwrap();
        assert_matches(&format!("{name} (manifest)"), &result, &fixture);
        compared += 1;
    }
    assert!(compared > 0, "{name}: a fixture needs dry_run or manifest");
}

fn assert_matches(case: &str, result: &Diff, fixture: &Fixture) {
    let paths: Vec<String> = result.fields.iter().map(|f| f.path.to_string()).collect();
    let expected: Vec<&str> = fixture.expect.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, expected, "{case}: differing fields\n{result:#?}");
    let ownership = Ownership::of(&fixture.live).unwrap();
    for (field, expected) in result.fields.iter().zip(&fixture.expect) {
        let at = format!("{case}: {}", expected.path);
        if let Some(pointer) = &expected.pointer {
            assert_eq!(&field.path.pointer(), pointer, "{at}: pointer");
        }
        let absent_is_null = |side: &Option<Value>| side.clone().unwrap_or(Value::Null);
        if let Some(desired) = &expected.desired {
            assert_eq!(&absent_is_null(&field.desired), desired, "{at}: desired");
        }
        if let Some(live) = &expected.live {
            assert_eq!(&absent_is_null(&field.live), live, "{at}: live");
        }
        if let Some(writer) = &expected.writer {
            let found: Option<Writer> = ownership.writer_of(&field.path);
            assert_eq!(
                &serde_json::to_value(found).unwrap(),
                writer,
                "{at}: writer"
            );
        }
    }
}

#[test]
fn server_defaulted_strategy_is_not_drift() {
    check("server_defaulted_strategy_is_not_drift");
}

#[test]
fn a_label_added_by_another_writer_is_not_drift() {
    check("a_label_added_by_another_writer_is_not_drift");
}

#[test]
fn kubectl_scale_is_attributed_to_the_scale_subresource_writer() {
    check("kubectl_scale_is_attributed_to_the_scale_subresource_writer");
}

#[test]
fn kubectl_edit_of_a_configmap_value_is_attributed_to_kubectl_edit() {
    check("kubectl_edit_of_a_configmap_value_is_attributed_to_kubectl_edit");
}

#[test]
fn kubectl_patch_of_a_container_image_names_the_container() {
    check("kubectl_patch_of_a_container_image_names_the_container");
}

#[test]
fn secret_values_are_masked_in_every_diff() {
    check("secret_values_are_masked_in_every_diff");
}

#[test]
fn an_hpa_owned_replica_count_is_ignored_by_its_manager() {
    check("an_hpa_owned_replica_count_is_ignored_by_its_manager");
}

#[test]
fn a_field_tether_owns_but_git_dropped_is_drift_without_a_dry_run() {
    check("a_field_tether_owns_but_git_dropped_is_drift_without_a_dry_run");
}

#[test]
fn server_side_apply_by_a_person_is_attributed_to_kubectl() {
    check("server_side_apply_by_a_person_is_attributed_to_kubectl");
}
