//! Time-bounded fuzzing on stable Rust: a proptest strategy drawn from for
//! `TETHER_FUZZ_SECONDS` seconds (default 3 per target in the suite;
//! `scripts/fuzz.sh` runs longer), each input checked; a failure is shrunk
//! to a small input, printed, and fails the test.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestError, TestRunner};
use serde_json::Value;

/// Seconds each target runs when `TETHER_FUZZ_SECONDS` is not set.
const DEFAULT_SECONDS: u64 = 3;

/// Checks `check` on inputs of `strategy` for a while; panics with the
/// shrunk input that failed.
pub fn for_a_while<S>(target: &str, strategy: S, check: impl Fn(S::Value) -> Result<(), String>)
where
    S: Strategy,
    S::Value: Debug,
{
    let seconds = std::env::var("TETHER_FUZZ_SECONDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(DEFAULT_SECONDS);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut inputs = 0u64;
    while Instant::now() < deadline {
        let mut runner = TestRunner::new(Config {
            cases: 64,
            failure_persistence: None,
            ..Config::default()
        });
        let result = runner.run(&strategy, |input| check(input).map_err(TestCaseError::fail));
        inputs += 64;
        match result {
            Ok(()) => {}
            Err(TestError::Fail(reason, input)) => {
                panic!("fuzz {target}: failed on {input:#?}: {reason}")
            }
            Err(TestError::Abort(reason)) => panic!("fuzz {target}: aborted: {reason}"),
        }
    }
    println!("fuzz {target}: {inputs} inputs in {seconds} s, 0 failures");
}

/// JSON values as manifests hold them: scalars (odd strings included),
/// lists and maps, a few levels deep.
pub fn values() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        "[a-zA-Z0-9 ._/:-]{0,12}".prop_map(Value::from),
        any::<String>().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..5)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Objects that look like Kubernetes manifests (apiVersion, kind,
/// metadata.name, some data), or anything else.
pub fn objects() -> impl Strategy<Value = Value> {
    let object = (
        prop_oneof![
            Just("v1"),
            Just("apps/v1"),
            Just("x.example.com/v1"),
            Just("")
        ],
        prop_oneof![
            Just("ConfigMap"),
            Just("Deployment"),
            Just("List"),
            Just("Thing")
        ],
        prop_oneof!["[a-z0-9-]{1,12}", any::<String>()],
        values(),
    )
        .prop_map(|(api_version, kind, name, data)| {
            serde_json::json!({"apiVersion": api_version, "kind": kind,
                "metadata": {"name": name}, "data": data})
        });
    prop_oneof![4 => object, 1 => values()]
}

/// Text near a valid document: `text` as written, cut short, or with
/// random bytes spliced in (YAML's own punctuation among them).
pub fn mutated(text: impl Strategy<Value = String>) -> impl Strategy<Value = Vec<u8>> {
    let noise = prop::collection::vec(
        prop_oneof![
            any::<u8>(),
            prop::sample::select(b"&*!|>-:{}[],#%@`'\"\t\n ".to_vec()),
        ],
        0..8,
    );
    (text, any::<prop::sample::Index>(), noise, 0..3u8).prop_map(|(text, at, noise, how)| {
        let mut bytes = text.into_bytes();
        let at = if bytes.is_empty() {
            0
        } else {
            at.index(bytes.len() + 1)
        };
        match how {
            0 => bytes,
            1 => {
                bytes.truncate(at);
                bytes
            }
            _ => {
                bytes.splice(at..at, noise);
                bytes
            }
        }
    })
}
