//! Signals from status fields other than conditions: phase and state
//! words (`status.phase`, `status.PostgresClusterStatus`,
//! `status.ceph.health`), flags (`status.ready`, `status.abort`), error
//! fields (`status.failureMessage`), replica counts, and the spec's own
//! `paused` / `suspend`.

use serde_json::{Map, Value};

use super::conditions;
use super::memo;
use super::signal::{Signal, Weight};
use super::words::{Meaning, meaning, split, words_meaning};

/// The last word of a field name that marks it as a phase or state word.
const STATE_FIELDS: &[&str] = &[
    "phase",
    "state",
    "status",
    "health",
    "condition",
    "stage",
    "result",
    "outcome",
    "level",
    "severity",
];

/// Last words that make a field a time or a count, never a state.
const NOT_STATE: &[&str] = &[
    "time",
    "timestamp",
    "at",
    "count",
    "counter",
    "total",
    "seconds",
    "generation",
    "hash",
    "id",
];

/// Replica counts compared with the desired number.
const REPLICA_COUNTS: &[&str] = &[
    "readyReplicas",
    "availableReplicas",
    "updatedReplicas",
    "currentReplicas",
];

/// The user paused it: `spec.paused`, `spec.suspend` and the like true,
/// or the annotations operators read for the same purpose
/// (`crossplane.io/paused: "true"`, `cluster.x-k8s.io/paused`,
/// `cnpg.io/reconciliationLoop: disabled`,
/// `kustomize.toolkit.fluxcd.io/reconcile: disabled`).
pub fn paused(object: &Value, out: &mut Vec<Signal>) {
    if let Some(spec) = object.get("spec").and_then(Value::as_object) {
        for (name, value) in spec {
            if value.as_bool() == Some(true) && meaning(name) == Some(Meaning::Paused) {
                out.push(Signal::new(Weight::Paused, format!("spec.{name} = true")));
            }
        }
    }
    let annotations = object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object);
    for (key, value) in annotations.into_iter().flatten() {
        let Some(value) = value.as_str() else {
            continue;
        };
        let name = key.rsplit('/').next().unwrap_or(key);
        let pauses = value == "true" && meaning(name) == Some(Meaning::Paused);
        let stops = matches!(value, "disabled" | "false" | "off" | "paused")
            && split(name).iter().any(|word| word.starts_with("reconcil"));
        if pauses || stops {
            out.push(Signal::new(
                Weight::Paused,
                format!("metadata.annotations[{key}] = {value}"),
            ));
        }
    }
}

/// Signals from `status`'s own fields and, one level down, from the fields
/// of objects (`status.ceph.health`) and of list items
/// (`status.parents[0].conditions`) in it.
pub fn status(status: &Map<String, Value>, object: &Object, out: &mut Vec<Signal>) {
    fields(status, "status", object, Depth::Top, out);
    for (name, value) in status {
        let path = format!("status.{name}");
        match value {
            Value::Object(inner) if name != "conditions" => {
                fields(inner, &path, object, Depth::Nested, out);
                // A part's own part (`status.connectorStatus.connector.state`),
                // for state words only.
                for (part, value) in inner {
                    if let Some(innermost) = value.as_object() {
                        states(innermost, &format!("{path}.{part}"), object, out);
                    }
                }
            }
            Value::Array(items) if name != "conditions" => {
                for (index, item) in items.iter().enumerate() {
                    if let Some(inner) = item.as_object() {
                        let path = format!("{path}[{index}]");
                        fields(inner, &path, object, Depth::Nested, out);
                        for (part, value) in inner {
                            if let Some(innermost) = value.as_object() {
                                states(innermost, &format!("{path}.{part}"), object, out);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// Only the phase and state words of `map` (no flags, errors or
/// conditions): what is read two levels down.
fn states(map: &Map<String, Value>, path: &str, object: &Object, out: &mut Vec<Signal>) {
    for (name, value) in map {
        let Value::String(word) = value else {
            continue;
        };
        if field_name(name).role != Role::State {
            continue;
        }
        let weight = match meaning(word) {
            Some(Meaning::Good) if object.finite && is_running(word) => Weight::Underway,
            Some(said) => Weight::of(said),
            None => continue,
        };
        out.push(Signal::new(weight, format!("{path}.{name} = {word}")));
    }
}

/// Where a map sits in the status: flags count only in `status` itself
/// (`status.ready`); deeper ones describe parts (a volume's snapshot
/// being `enabled: false` is no trouble of the whole).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Depth {
    Top,
    Nested,
}

/// Signals from the fields of one object of the status, named under `path`.
fn fields(
    map: &Map<String, Value>,
    path: &str,
    object: &Object,
    depth: Depth,
    out: &mut Vec<Signal>,
) {
    for (name, value) in map {
        let field = || format!("{path}.{name}");
        if name == "conditions" {
            conditions::signals(value, &field(), object.generation, out);
            continue;
        }
        if value.is_number() || value.is_null() {
            continue;
        }
        let name_says = field_name(name);
        if name_says.role == Role::Count {
            continue;
        }
        match value {
            Value::String(word) if name_says.role == Role::State => {
                let weight = match meaning(word) {
                    Some(Meaning::Good) if object.finite && is_running(word) => Weight::Underway,
                    Some(said) => Weight::of(said),
                    None => continue,
                };
                out.push(Signal::new(weight, format!("{} = {word}", field())));
            }
            Value::Bool(flag) => {
                if depth == Depth::Top
                    && let Some(weight) = flag_weight(name_says.meaning, *flag)
                {
                    out.push(Signal::new(weight, format!("{} = {flag}", field())));
                }
            }
            _ if !is_empty(value) && name_says.meaning == Some(Meaning::Failure) => {
                let detail = error_text(value);
                out.push(Signal::new(Weight::Failure, field()).with_message(&detail));
            }
            _ => {}
        }
    }
}

/// What a field's name says: its role, by its last word, and its meaning.
#[derive(Clone, Copy)]
struct FieldName {
    role: Role,
    meaning: Option<Meaning>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// A phase or state word (`phase`, `PostgresClusterStatus`).
    State,
    /// A time or a count, never a state (`failedAt`, `errorCount`).
    Count,
    Other,
}

thread_local! {
    static FIELD_NAMES: memo::Memo<FieldName> = memo::Memo::default();
}

fn field_name(name: &str) -> FieldName {
    memo::remembered(&FIELD_NAMES, name, |name| {
        let words = split(name);
        let last = words.last().map(String::as_str).unwrap_or("");
        let role = if NOT_STATE.contains(&last) {
            Role::Count
        } else if STATE_FIELDS.contains(&last) {
            Role::State
        } else {
            Role::Other
        };
        FieldName {
            role,
            meaning: words_meaning(&words),
        }
    })
}

/// What the inference knows of the object whose status it reads.
pub struct Object {
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// Whether the kind runs to completion (`AnalysisRun`, `Backup`,
    /// `PipelineRun`): for those, `Running` is work underway, not a
    /// steady state.
    pub finite: bool,
}

/// Last words of kinds that run to completion.
const FINITE_KINDS: &[&str] = &[
    "run",
    "job",
    "task",
    "build",
    "backup",
    "restore",
    "migration",
    "workflow",
    "experiment",
    "analysis",
    "test",
    "snapshot",
    "upgrade",
    "operation",
    "request",
    "action",
    "import",
    "export",
    "scan",
    "rollback",
    "sync",
];

impl Object {
    pub fn of(object: &Value, kind: &str) -> Self {
        Object {
            generation: object
                .pointer("/metadata/generation")
                .and_then(Value::as_i64),
            finite: split(kind)
                .last()
                .is_some_and(|word| FINITE_KINDS.contains(&word.as_str())),
        }
    }
}

/// The steady-state words that mean "not done yet" for a finite kind.
fn is_running(word: &str) -> bool {
    matches!(
        word.to_ascii_lowercase().as_str(),
        "running" | "active" | "started"
    )
}

/// What a flag says: `ready: false` is progress, `abort: true` a failure,
/// `paused: true` a pause, `ready: true` good news.
fn flag_weight(named: Option<Meaning>, flag: bool) -> Option<Weight> {
    match (named?, flag) {
        (Meaning::Failure, true) => Some(Weight::Failure),
        (Meaning::Paused, true) => Some(Weight::Paused),
        (Meaning::Good, true) => Some(Weight::Good),
        (Meaning::Good, false) => Some(Weight::Underway),
        (Meaning::Lacking, true) => Some(Weight::Lacking),
        _ => None,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// An error field's text: itself if a string, its `message` if an object.
fn error_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Object(map) => map
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => String::new(),
    }
}

/// Replica-like counts short of the desired number (`spec.replicas`, else
/// `status.replicas`) are progress; all of them there is good news.
pub fn replicas(object: &Value, out: &mut Vec<Signal>) {
    let int = |pointer: &str| object.pointer(pointer).and_then(Value::as_i64);
    let desired = int("/spec/replicas").or_else(|| int("/status/replicas"));
    let Some(desired) = desired else {
        return;
    };
    let mut seen = false;
    for count in REPLICA_COUNTS {
        let Some(have) = int(&format!("/status/{count}")) else {
            continue;
        };
        seen = true;
        if have != desired {
            out.push(Signal::new(
                Weight::Shortfall,
                format!("status.{count} = {have} of {desired}"),
            ));
            return;
        }
    }
    if let Some(replicas) = int("/status/replicas")
        && replicas != desired
    {
        out.push(Signal::new(
            Weight::Shortfall,
            format!("status.replicas = {replicas} of {desired}"),
        ));
        return;
    }
    if seen {
        out.push(Signal::new(
            Weight::Good,
            format!("{desired} of {desired} replicas ready"),
        ));
    }
}

/// `status.observedGeneration` behind `metadata.generation`: the operator
/// has not yet acted on the latest spec; equal to it, the operator has
/// looked at the latest spec and is still writing status. Numbers written
/// as strings count; other strings (some operators put a hash there) do
/// not. A part's observed generation (`status.workloadObservedGeneration`)
/// is compared in the same way with the generation the object records for
/// that part in an annotation (`…/workload-generation`).
pub fn generation(object: &Value, generation: Option<i64>, out: &mut Vec<Signal>) {
    if let (Some(observed), Some(generation)) = (
        number(object.pointer("/status/observedGeneration")),
        generation,
    ) {
        out.push(if observed < generation {
            Signal::new(
                Weight::Underway,
                format!("status.observedGeneration = {observed}, behind generation {generation}"),
            )
        } else {
            Signal::new(
                Weight::Good,
                format!("status.observedGeneration = {observed}, the latest generation"),
            )
        });
    }
    let (Some(status), Some(annotations)) = (
        object.get("status").and_then(Value::as_object),
        object
            .pointer("/metadata/annotations")
            .and_then(Value::as_object),
    ) else {
        return;
    };
    for (name, value) in status {
        let Some(part) = name
            .strip_suffix("ObservedGeneration")
            .filter(|p| !p.is_empty())
        else {
            continue;
        };
        let wanted = format!("{}-generation", split(part).join("-"));
        let recorded = annotations.iter().find_map(|(key, value)| {
            let last = key.rsplit('/').next().unwrap_or(key);
            (last == wanted).then(|| number(Some(value))).flatten()
        });
        if let (Some(observed), Some(recorded)) = (number(Some(value)), recorded)
            && observed < recorded
        {
            out.push(Signal::new(
                Weight::Underway,
                format!("status.{name} = {observed}, behind generation {recorded}"),
            ));
        }
    }
}

/// An integer, or a string holding one.
fn number(value: Option<&Value>) -> Option<i64> {
    let value = value?;
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|text| text.parse().ok()))
}
