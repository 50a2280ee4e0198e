//! Editing manifest files in place: one fixture pair per case
//! (`tests/fixtures/adopt/NAME.before.*` → `NAME.after.*`), compared as
//! full text, and the edited object re-read to check the values.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tether_source::adopt::{EditError, FieldEdit, Selector, edit_file};
use tether_source::manifest::parse_file;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/adopt")
        .join(name)
}

/// Edits `NAME.before.EXT` and checks the text is exactly `NAME.after.EXT`
/// and that kubectl's reading of the edited object has the new values.
fn check(
    name: &str,
    ext: &str,
    document: usize,
    item: Option<usize>,
    edits: &[(&str, Option<Value>)],
) {
    let before = std::fs::read_to_string(fixture(&format!("{name}.before.{ext}"))).unwrap();
    let expected = std::fs::read_to_string(fixture(&format!("{name}.after.{ext}"))).unwrap();
    let edits: Vec<FieldEdit> = edits
        .iter()
        .map(|(path, value)| FieldEdit {
            path: Selector::parse(path).unwrap(),
            value: value.clone(),
        })
        .collect();
    let file = PathBuf::from(format!("apps/{name}.{ext}"));
    let after = edit_file(&file, &before, document, item, &edits).unwrap();
    assert_eq!(after, expected, "\n--- got ---\n{after}");
    let objects = parse_file(&file, after.as_bytes()).unwrap();
    let (_, object) = objects
        .iter()
        .find(|(origin, _)| origin.document == document && origin.item == item)
        .unwrap();
    for edit in &edits {
        assert_eq!(edit.path.get(object), edit.value.as_ref(), "{}", edit.path);
    }
}

#[test]
fn a_replicas_change_keeps_the_comments_around_it() {
    check(
        "replicas",
        "yaml",
        0,
        None,
        &[("spec.replicas", Some(json!(5)))],
    );
}

#[test]
fn a_container_image_is_found_by_the_container_name_and_keeps_its_quotes() {
    check(
        "image",
        "yaml",
        0,
        None,
        &[(
            "spec.template.spec.containers[name=app].image",
            Some(json!("registry.local/web:1.2.1-hotfix")),
        )],
    );
}

#[test]
fn fields_absent_from_the_file_are_inserted_with_their_siblings_indentation() {
    check(
        "absent",
        "yaml",
        0,
        None,
        &[
            ("metadata.annotations.incident", Some(json!("INC-1234"))),
            (
                "spec.template.spec.containers[name=app].resources",
                Some(json!({"limits": {"memory": "512Mi"}})),
            ),
        ],
    );
}

#[test]
fn strings_that_yaml_would_read_as_booleans_or_numbers_are_quoted() {
    check(
        "quoting",
        "yaml",
        0,
        None,
        &[
            ("data.enabled", Some(json!("yes"))),
            ("data.version", Some(json!("1.10"))),
            ("data.mode", Some(json!("on"))),
        ],
    );
}

#[test]
fn in_a_multi_document_file_only_the_objects_document_changes() {
    check(
        "multi",
        "yaml",
        1,
        None,
        &[("data.key", Some(json!("two")))],
    );
}

#[test]
fn list_items_are_edited_in_place_in_flow_and_block_style() {
    check(
        "list",
        "yaml",
        0,
        Some(0),
        &[("data.extra", Some(json!("x")))],
    );
    let before = std::fs::read_to_string(fixture("list.before.yaml")).unwrap();
    let edits = [FieldEdit {
        path: Selector::parse("data.key").unwrap(),
        value: Some(json!("two")),
    }];
    let after = edit_file(Path::new("list.yaml"), &before, 0, Some(1), &edits).unwrap();
    assert!(after.contains("    key: two # b's key\n"), "{after}");
    assert!(after.contains("data: {key: one}"), "{after}");
}

#[test]
fn a_configmap_value_changes_and_a_removed_key_goes_with_its_line() {
    check(
        "configmap",
        "yaml",
        0,
        None,
        &[
            ("data.LOG_LEVEL", Some(json!("debug"))),
            (
                "data[\"app.properties\"]",
                Some(json!("threads=8\ncache=on\n")),
            ),
            ("data.stale", None),
        ],
    );
}

#[test]
fn json_files_keep_their_key_order_and_layout() {
    check(
        "json",
        "json",
        0,
        None,
        &[
            ("data.z", Some(json!("10"))),
            ("metadata.labels", Some(json!({"team": "shop"}))),
        ],
    );
}

/// Setting `spec.x` to 1 in document `document` of `apps/web.yaml` holding
/// `text`, which must fail.
fn set_spec_x(text: &str, document: usize) -> EditError {
    let edit = FieldEdit {
        path: Selector::parse("spec.x").unwrap(),
        value: Some(json!(1)),
    };
    edit_file(Path::new("apps/web.yaml"), text, document, None, &[edit]).unwrap_err()
}

#[test]
fn a_missing_document_is_an_error_that_names_the_file() {
    let error = set_spec_x("kind: A\n", 3);
    assert_eq!(error.to_string(), "apps/web.yaml:0: has no document 4");
}

#[test]
fn a_field_below_a_scalar_cannot_be_written_and_says_where() {
    let error = set_spec_x("kind: A\nspec: 3\n", 0);
    assert_eq!(error.line, 2, "{error}");
    assert!(error.to_string().contains("spec.x"), "{error}");
}

#[test]
fn a_null_inside_a_flow_mapping_becomes_a_flow_mapping_not_block_lines() {
    // Found by the adopt editor's fuzz target (tests/fuzz.rs): block lines
    // written into `{…}` broke the file.
    check(
        "flow-null",
        "yaml",
        0,
        None,
        &[("data.key", Some(json!("7")))],
    );
}
