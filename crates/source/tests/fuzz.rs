//! Fuzz targets (issue 21): each parser of untrusted input fed generated
//! and mutated inputs for `TETHER_FUZZ_SECONDS` seconds (3 in the suite;
//! `scripts/fuzz.sh` runs them longer). None may panic; each keeps the
//! promise its input is trusted with. Targets of `tether-core` (the diff
//! normalizer, the health-rule loader) run here too, beside the readers of
//! what reaches them.

use std::path::Path;

use proptest::prelude::*;
use serde_json::Value;
use tether_core::diff::{SecretMask, diff};
use tether_core::health::rules::RuleSet;
use tether_source::adopt::Selector;
use tether_source::adopt::yaml::{FieldEdit, edit_file};
use tether_source::limits::{Budget, Limits};
use tether_source::manifest::parse_file;
use tether_source::render::read_output;
use tether_source::webhook::parse_push;
use tether_testkit::fuzz::{for_a_while, mutated, objects, values};

/// A YAML stream or JSON text of generated objects.
fn documents(json: bool) -> impl Strategy<Value = String> {
    prop::collection::vec(objects(), 1..4).prop_map(move |objects| {
        let docs: Vec<String> = objects
            .iter()
            .map(|o| match json {
                true => serde_json::to_string(o).unwrap(),
                false => serde_saphyr_like(o),
            })
            .collect();
        docs.join(if json { "\n" } else { "\n---\n" })
    })
}

/// YAML text of `value` (JSON is YAML; pretty JSON exercises block-ish
/// indentation and flow collections).
fn serde_saphyr_like(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap()
}

#[test]
fn the_manifest_reader_never_panics_and_names_the_file_in_every_error() {
    let input = (any::<bool>(), any::<bool>()).prop_flat_map(|(json, raw)| {
        let bytes = match raw {
            true => prop::collection::vec(any::<u8>(), 0..256).boxed(),
            false => mutated(documents(json)).boxed(),
        };
        (Just(json), bytes)
    });
    for_a_while("manifest reader", input, |(json, bytes)| {
        let file = Path::new(if json {
            "app/fuzz.json"
        } else {
            "app/fuzz.yaml"
        });
        match parse_file(file, &bytes) {
            Ok(_) => Ok(()),
            Err(error) if error.to_string().contains("fuzz.") => Ok(()),
            Err(error) => Err(format!("an error that does not name the file: {error}")),
        }
    });
}

#[test]
fn the_kustomize_and_helm_output_reader_never_panics_and_names_what_it_read() {
    // Output as the renderers print it: documents, some after helm's
    // `# Source:` comments (odd ones too), mutated.
    let source = prop_oneof![
        Just("# Source: web/templates/a.yaml\n".to_string()),
        Just("# Source: \n".to_string()),
        "# Source: [^\n]{0,30}\n".prop_map(|s| s),
        Just(String::new()),
    ];
    let stream = prop::collection::vec((source, documents(false)), 1..4).prop_map(|parts| {
        parts
            .into_iter()
            .map(|(source, doc)| format!("---\n{source}{doc}\n"))
            .collect::<String>()
    });
    let input = (
        prop_oneof![Just("helm"), Just("kustomize")],
        mutated(stream),
    );
    for_a_while(
        "kustomize/helm output reader",
        input,
        |(renderer, output)| {
            let mut budget = Budget::new(Limits::default());
            match read_output(renderer, "apps/web", &output, &mut budget) {
                Ok(_) => Ok(()),
                Err(error) if error.to_string().contains("apps/web") => Ok(()),
                Err(error) => Err(format!(
                    "an error that does not name the app's path: {error}"
                )),
            }
        },
    );
}

#[test]
fn the_diff_normalizer_never_panics_and_finds_nothing_between_an_object_and_itself() {
    let input = (objects(), objects());
    for_a_while("diff normalizer", input, |(desired, live)| {
        // Any pair: an error or a diff, never a panic.
        let _ = diff(&desired, &live, &[], SecretMask::Hidden);
        if let Ok(same) = diff(&desired, &desired, &[], SecretMask::Hidden)
            && !same.fields.is_empty()
        {
            return Err(format!("an object differs from itself: {:?}", same.fields));
        }
        Ok(())
    });
}

#[test]
fn the_webhook_parsers_never_panic_and_never_accept_an_unsigned_or_forged_push() {
    let provider = prop_oneof![
        Just(("X-GitHub-Event", "X-Hub-Signature-256")),
        Just(("X-Gitlab-Event", "X-Gitlab-Token")),
        Just(("X-Gitea-Event", "X-Gitea-Signature")),
    ];
    let body = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..256),
        mutated(values().prop_map(|v| v.to_string())),
        mutated(Just(
            r#"{"ref":"refs/heads/main","repository":{"clone_url":"https://example.com/a.git"},"commits":[]}"#
                .to_string()
        )),
    ];
    let signature = prop_oneof![Just(None), "[a-z0-9=]{0,80}".prop_map(Some)];
    let input = (provider, body, signature, "[a-z]{8,16}");
    for_a_while(
        "webhook parsers",
        input,
        |((event, sign), body, signature, secret)| {
            let header = |name: &str| match name {
                n if n.eq_ignore_ascii_case(event) => Some("push".to_string()),
                n if n.eq_ignore_ascii_case(sign) => signature.clone(),
                _ => None,
            };
            match parse_push(header, &body, secret.as_bytes()) {
                // The token or HMAC here is never the secret's.
                Ok(push) => Err(format!("a push accepted without the secret: {push:?}")),
                Err(_) => Ok(()),
            }
        },
    );
}

#[test]
fn the_health_rule_loader_never_panics_on_any_file() {
    let rule = (
        "[A-Za-z]{1,10}",
        prop_oneof![
            Just("has(object.status) && object.status.ready".to_string()),
            Just("object.status.phase == 'Failed'".to_string()),
            any::<String>(),
        ],
    )
        .prop_map(|(kind, expression)| {
            format!(
                "rules:\n  - group: example.com\n    kind: {kind}\n    health:\n      - when: {expression:?}\n        status: Degraded\n        message: \"'x'\"\n"
            )
        });
    let input = prop_oneof![mutated(rule), prop::collection::vec(any::<u8>(), 0..200),];
    for_a_while("health rule loader", input, |bytes| {
        let text = String::from_utf8_lossy(&bytes);
        let _ = RuleSet::from_yaml("fuzz.yaml", &text);
        Ok(())
    });
}

#[test]
fn the_adopt_yaml_editor_never_panics_and_what_it_writes_still_reads_with_the_edit() {
    let file = (
        documents(false),
        prop_oneof![
            Just("data.key"),
            Just("data.a.b"),
            Just("metadata.labels.x")
        ],
        values(),
    );
    for_a_while("adopt YAML editor", file, |(text, path, value)| {
        let edit = FieldEdit {
            path: Selector::parse(path).map_err(|e| e.to_string())?,
            value: Some(value.clone()),
        };
        let Ok(edited) = edit_file(Path::new("app/fuzz.yaml"), &text, 0, None, &[edit]) else {
            return Ok(());
        };
        let objects = parse_file(Path::new("app/fuzz.yaml"), edited.as_bytes())
            .map_err(|error| format!("the edited file no longer reads: {error}\n{edited}"))?;
        let pointer = format!("/{}", path.replace('.', "/"));
        let first = objects.first().map(|(_, object)| object);
        match first.and_then(|object| object.pointer(&pointer)) {
            Some(written) if *written == value => Ok(()),
            // A value YAML reads back as another type (a string "1", a
            // float) is the editor's choice of spelling, not checked here.
            Some(_) if !matches!(value, Value::Object(_) | Value::Array(_)) => Ok(()),
            other => Err(format!(
                "{path} reads back as {other:?}, not {value}\n{edited}"
            )),
        }
    });
}
