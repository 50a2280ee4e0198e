//! Field selectors: a drifted field's dotted path
//! (`spec.template.spec.containers[name=app].image`) read back into steps,
//! and those steps followed in a JSON value.
//!
//! List elements are found by their keys (`[name=app]`), by value
//! (`[=x]`) or by position (`[3]`): positions are the live object's, so
//! keyed steps are what make an edit land on the right element of the file.

use std::fmt;

use serde_json::{Map, Value};
use tether_core::diff::{FieldPath, Segment};

/// One step into an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A mapping key.
    Field(String),
    /// The element of a list whose fields have these values (as text).
    Keyed(Vec<(String, String)>),
    /// The element of a list of scalars with this value (as text).
    Value(String),
    /// The element at a position.
    Index(usize),
}

/// A path of [`Step`]s from the root of an object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(pub Vec<Step>);

/// Why a dotted path could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field path {path:?}: {reason}")]
pub struct SelectorError {
    pub path: String,
    pub reason: String,
}

impl Selector {
    /// Reads the dotted form that [`FieldPath`] prints.
    ///
    /// ```
    /// use tether_source::adopt::{Selector, Step};
    /// let path = Selector::parse("spec.containers[name=app].image").unwrap();
    /// assert_eq!(path.0[2], Step::Keyed(vec![("name".into(), "app".into())]));
    /// ```
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        let error = |reason: &str| SelectorError {
            path: text.to_string(),
            reason: reason.to_string(),
        };
        let mut steps = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(inner) = rest.strip_prefix('[') {
                let (step, after) = if inner.starts_with('"') {
                    let mut stream =
                        serde_json::Deserializer::from_str(inner).into_iter::<String>();
                    let key = match stream.next() {
                        Some(Ok(key)) => key,
                        _ => return Err(error("unterminated quoted key")),
                    };
                    let after = &inner[stream.byte_offset()..];
                    let after = after
                        .strip_prefix(']')
                        .ok_or_else(|| error("expected `]` after a quoted key"))?;
                    (Step::Field(key), after)
                } else {
                    let (body, after) =
                        inner.split_once(']').ok_or_else(|| error("unclosed `[`"))?;
                    (
                        bracket_step(body).ok_or_else(|| error("bad `[...]` selector"))?,
                        after,
                    )
                };
                steps.push(step);
                rest = after;
            } else {
                let end = rest.find(['.', '[']).unwrap_or(rest.len());
                if end == 0 {
                    return Err(error("empty field name"));
                }
                steps.push(Step::Field(rest[..end].to_string()));
                rest = &rest[end..];
            }
            if let Some(after) = rest.strip_prefix('.') {
                if after.is_empty() || after.starts_with(['.', '[']) {
                    return Err(error("empty field name"));
                }
                rest = after;
            }
        }
        if steps.is_empty() {
            return Err(error("empty path"));
        }
        Ok(Selector(steps))
    }

    pub fn steps(&self) -> &[Step] {
        &self.0
    }

    /// Whether the path starts with these mapping keys.
    pub fn starts_with_fields(&self, names: &[&str]) -> bool {
        names.len() <= self.0.len()
            && names
                .iter()
                .zip(&self.0)
                .all(|(name, step)| *step == Step::Field(name.to_string()))
    }

    /// This path, one step deeper.
    pub fn child(&self, step: Step) -> Selector {
        let mut steps = self.0.clone();
        steps.push(step);
        Selector(steps)
    }

    /// The value at this path in `value`, if present.
    pub fn get<'v>(&self, value: &'v Value) -> Option<&'v Value> {
        self.0.iter().try_fold(value, |node, step| match node {
            Value::Object(map) => match step {
                Step::Field(name) => map.get(name),
                _ => None,
            },
            Value::Array(items) => element(items, step).map(|i| &items[i]),
            _ => None,
        })
    }

    /// Sets (or with `None` removes) the value at this path in `value`,
    /// creating missing mappings and keyed elements on the way. Fails when
    /// the path crosses a scalar or an absent position.
    pub fn set(&self, value: &mut Value, new: Option<Value>) -> Result<(), String> {
        set_in(value, &self.0, new)
    }
}

fn bracket_step(body: &str) -> Option<Step> {
    if let Some(value) = body.strip_prefix('=') {
        return Some(Step::Value(value.to_string()));
    }
    if let Ok(index) = body.parse::<usize>() {
        return Some(Step::Index(index));
    }
    let keys: Option<Vec<(String, String)>> = body
        .split(',')
        .map(|pair| {
            let (key, value) = pair.split_once('=')?;
            (!key.is_empty()).then(|| (key.to_string(), value.to_string()))
        })
        .collect();
    keys.filter(|keys| !keys.is_empty()).map(Step::Keyed)
}

/// The text a scalar is compared by in a selector: strings as they are,
/// other scalars in their JSON form.
pub fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Object(_) | Value::Array(_) => None,
        other => Some(other.to_string()),
    }
}

/// The position in `items` that `step` names.
pub(crate) fn element(items: &[Value], step: &Step) -> Option<usize> {
    match step {
        Step::Index(index) => (*index < items.len()).then_some(*index),
        Step::Value(text) => items
            .iter()
            .position(|item| scalar_text(item).as_deref() == Some(text)),
        Step::Keyed(keys) => keyed_position(items.len(), keys, |index, key| {
            items[index].get(key).and_then(scalar_text)
        }),
        Step::Field(_) => None,
    }
}

/// The element whose key fields have the values of `keys`; failing that,
/// the only element whose first key matches and whose other keys match or
/// are absent (a manifest may leave out a key the server defaults, such as
/// a port's `protocol`).
pub(crate) fn keyed_position(
    len: usize,
    keys: &[(String, String)],
    key_of: impl Fn(usize, &str) -> Option<String>,
) -> Option<usize> {
    let matches = |index: usize, lenient: bool| {
        keys.iter()
            .enumerate()
            .all(|(n, (key, text))| match key_of(index, key) {
                Some(value) => value == *text,
                None => lenient && n > 0,
            })
    };
    (0..len).find(|i| matches(*i, false)).or_else(|| {
        let mut loose = (0..len).filter(|i| matches(*i, true));
        match (loose.next(), loose.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    })
}

/// A new list element for a keyed step: its key fields, typed as numbers
/// when they read as numbers (`containerPort=80`).
pub(crate) fn keyed_element(keys: &[(String, String)]) -> Value {
    let fields: Map<String, Value> = keys
        .iter()
        .map(|(key, text)| {
            let value = text
                .parse::<i64>()
                .map(Value::from)
                .unwrap_or_else(|_| Value::String(text.clone()));
            (key.clone(), value)
        })
        .collect();
    Value::Object(fields)
}

/// The value that `steps` from an absent node would create around `leaf`.
pub(crate) fn build(steps: &[Step], leaf: Value) -> Result<Value, String> {
    let Some((first, rest)) = steps.split_first() else {
        return Ok(leaf);
    };
    let inner = build(rest, leaf)?;
    match first {
        Step::Field(name) => Ok(Value::Object(Map::from_iter([(name.clone(), inner)]))),
        Step::Keyed(keys) => {
            let mut element = keyed_element(keys);
            match (inner, rest.is_empty()) {
                (Value::Object(fields), _) => {
                    element.as_object_mut().expect("an object").extend(fields);
                }
                (other, true) => element = other,
                (_, false) => return Err("a keyed element must be a mapping".into()),
            }
            Ok(Value::Array(vec![element]))
        }
        Step::Value(_) | Step::Index(0) => Ok(Value::Array(vec![inner])),
        Step::Index(index) => Err(format!("position {index} does not exist")),
    }
}

fn set_in(node: &mut Value, steps: &[Step], new: Option<Value>) -> Result<(), String> {
    let Some((first, rest)) = steps.split_first() else {
        if let Some(new) = new {
            *node = new;
        }
        return Ok(());
    };
    if node.is_null() && new.is_some() {
        *node = match first {
            Step::Field(_) => Value::Object(Map::new()),
            _ => Value::Array(Vec::new()),
        };
    }
    match (node, first) {
        (Value::Object(map), Step::Field(name)) => match (rest.is_empty(), new) {
            (true, None) => {
                map.remove(name);
                Ok(())
            }
            (true, Some(new)) => {
                map.insert(name.clone(), new);
                Ok(())
            }
            (false, new) => match map.get_mut(name) {
                Some(child) => set_in(child, rest, new),
                None if new.is_none() => Ok(()),
                None => {
                    map.insert(name.clone(), build(rest, new.expect("checked"))?);
                    Ok(())
                }
            },
        },
        (Value::Array(items), step) if !matches!(step, Step::Field(_)) => {
            match (element(items, step), rest.is_empty(), new) {
                (Some(index), true, None) => {
                    items.remove(index);
                    Ok(())
                }
                (Some(index), _, new) => set_in(&mut items[index], rest, new),
                (None, _, None) => Ok(()),
                (None, _, Some(new)) => match step {
                    Step::Index(index) if *index != items.len() => {
                        Err(format!("position {index} does not exist"))
                    }
                    _ => {
                        let built = build(steps, new)?;
                        items.extend(built.as_array().cloned().unwrap_or_default());
                        Ok(())
                    }
                },
            }
        }
        (node, step) => Err(format!(
            "cannot take step {} into {}",
            Selector(vec![step.clone()]),
            kind_name(node)
        )),
    }
}

fn kind_name(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "a mapping",
        Value::Array(_) => "a list",
        Value::Null => "null",
        _ => "a scalar",
    }
}

impl From<&FieldPath> for Selector {
    fn from(path: &FieldPath) -> Selector {
        let step = |segment: &Segment| match segment {
            Segment::Field(name) => Step::Field(name.clone()),
            Segment::Keyed { keys, .. } => Step::Keyed(
                keys.iter()
                    .map(|(key, value)| (key.clone(), scalar_text(value).unwrap_or_default()))
                    .collect(),
            ),
            Segment::Value { value, .. } => Step::Value(scalar_text(value).unwrap_or_default()),
            Segment::Index(index) => Step::Index(*index),
        };
        Selector(path.segments().iter().map(step).collect())
    }
}

/// A selector prints as the field path it was read from: one set of
/// rules (core's) decides how paths are spelt (positions of keyed and
/// valued elements are not printed, so they are left 0).
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = |text: &String| Value::String(text.clone());
        let segment = |step: &Step| match step {
            Step::Field(name) => Segment::Field(name.clone()),
            Step::Keyed(keys) => Segment::Keyed {
                keys: keys.iter().map(|(k, v)| (k.clone(), text(v))).collect(),
                index: 0,
            },
            Step::Value(value) => Segment::Value {
                value: text(value),
                index: 0,
            },
            Step::Index(index) => Segment::Index(*index),
        };
        self.0.iter().map(segment).collect::<FieldPath>().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_form_that_a_field_path_prints_reads_back_the_same() {
        let path = FieldPath::fields(["metadata", "labels", "app.kubernetes.io/name"]);
        for path in [
            path,
            FieldPath::fields(["spec", "template", "spec", "containers"])
                .child(Segment::Keyed {
                    keys: vec![
                        ("containerPort".into(), json!(80)),
                        ("protocol".into(), json!("TCP")),
                    ],
                    index: 3,
                })
                .field("image"),
            FieldPath::fields(["metadata", "finalizers"]).child(Segment::Value {
                value: json!("x"),
                index: 2,
            }),
            FieldPath::fields(["spec", "args"]).child(Segment::Index(1)),
        ] {
            let selector = Selector::parse(&path.to_string()).unwrap();
            assert_eq!(selector, Selector::from(&path), "{path}");
            assert_eq!(selector.to_string(), path.to_string());
        }
    }

    #[test]
    fn malformed_paths_are_errors_that_quote_the_path() {
        for text in ["", "a..b", "a[", "a[name]", "a.", "[\"x"] {
            let error = Selector::parse(text).unwrap_err();
            assert!(error.to_string().contains(&format!("{text:?}")), "{error}");
        }
    }

    #[test]
    fn a_key_the_manifest_leaves_to_the_server_still_finds_its_element() {
        let ports = json!({"ports": [{"containerPort": 80}, {"containerPort": 443}]});
        let path = Selector::parse("ports[containerPort=443,protocol=TCP]").unwrap();
        assert_eq!(path.get(&ports), Some(&json!({"containerPort": 443})));
        let other = Selector::parse("ports[containerPort=8080,protocol=TCP]").unwrap();
        assert_eq!(other.get(&ports), None);
    }

    #[test]
    fn setting_a_keyed_field_finds_the_element_by_its_key() {
        let mut object =
            json!({"spec": {"containers": [{"name": "a"}, {"name": "app", "image": "x:1"}]}});
        let path = Selector::parse("spec.containers[name=app].image").unwrap();
        path.set(&mut object, Some(json!("x:2"))).unwrap();
        assert_eq!(path.get(&object), Some(&json!("x:2")));
        let side = Selector::parse("spec.containers[name=side].image").unwrap();
        side.set(&mut object, Some(json!("s:1"))).unwrap();
        assert_eq!(
            object["spec"]["containers"][2],
            json!({"name": "side", "image": "s:1"})
        );
        Selector::parse("spec.containers[name=a]")
            .unwrap()
            .set(&mut object, None)
            .unwrap();
        assert_eq!(object["spec"]["containers"].as_array().unwrap().len(), 2);
    }
}
