//! Field paths: where in an object a difference sits.
//!
//! A path is a list of [`Segment`]s. It prints two ways: a dotted form for
//! people (`spec.template.spec.containers[name=app].image`) and an RFC 6901
//! JSON pointer for machines (`/spec/template/spec/containers/0/image`).

use std::fmt;

use serde::{Serialize, Serializer};
use serde_json::Value;

/// One step into an object.
#[derive(Debug, Clone, PartialEq)]
pub enum Segment {
    /// A key of a mapping.
    Field(String),
    /// An element of an associative list, named by its key fields
    /// (`[name=app]`). `index` is its position in live, or in desired when
    /// live lacks it.
    Keyed {
        keys: Vec<(String, Value)>,
        index: usize,
    },
    /// An element of a set of scalars, named by its value (`finalizers`).
    /// `index` is its position in live.
    Value { value: Value, index: usize },
    /// An element of a list without keys, by position.
    Index(usize),
}

/// A path from the root of an object to one field.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldPath(Vec<Segment>);

impl FieldPath {
    /// The root of the object.
    pub fn root() -> Self {
        FieldPath(Vec::new())
    }

    /// A path of plain mapping keys: `FieldPath::fields(["spec", "replicas"])`.
    pub fn fields<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        FieldPath(
            names
                .into_iter()
                .map(|name| Segment::Field(name.to_string()))
                .collect(),
        )
    }

    /// This path, one step deeper.
    pub fn child(&self, segment: Segment) -> Self {
        let mut segments = self.0.clone();
        segments.push(segment);
        FieldPath(segments)
    }

    /// This path, one mapping key deeper.
    pub fn field(&self, name: &str) -> Self {
        self.child(Segment::Field(name.to_string()))
    }

    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    /// Whether this path starts with `prefix`.
    pub fn starts_with(&self, prefix: &FieldPath) -> bool {
        self.0.starts_with(&prefix.0)
    }

    /// The RFC 6901 JSON pointer of this path in the object whose positions
    /// it records (live, or desired for elements only desired has).
    pub fn pointer(&self) -> String {
        self.0
            .iter()
            .map(|segment| match segment {
                Segment::Field(name) => {
                    format!("/{}", name.replace('~', "~0").replace('/', "~1"))
                }
                Segment::Keyed { index, .. }
                | Segment::Value { index, .. }
                | Segment::Index(index) => format!("/{index}"),
            })
            .collect()
    }
}

/// A path of these segments, in order.
impl FromIterator<Segment> for FieldPath {
    fn from_iter<I: IntoIterator<Item = Segment>>(segments: I) -> Self {
        FieldPath(segments.into_iter().collect())
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Field(name) if is_plain(name) => {
                    if position > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(name)?;
                }
                Segment::Field(name) => write!(f, "[{}]", Value::String(name.clone()))?,
                Segment::Keyed { keys, .. } => {
                    f.write_str("[")?;
                    for (n, (key, value)) in keys.iter().enumerate() {
                        if n > 0 {
                            f.write_str(",")?;
                        }
                        write!(f, "{key}={}", scalar_text(value))?;
                    }
                    f.write_str("]")?;
                }
                Segment::Value { value, .. } => write!(f, "[={}]", scalar_text(value))?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// Paths serialize as their dotted form.
impl Serialize for FieldPath {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Keys printed without quotes: identifiers as Kubernetes spells fields.
fn is_plain(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_container_image_prints_by_name_and_points_by_index() {
        let path = FieldPath::fields(["spec", "template", "spec", "containers"])
            .child(Segment::Keyed {
                keys: vec![("name".into(), json!("app"))],
                index: 1,
            })
            .field("image");
        assert_eq!(
            path.to_string(),
            "spec.template.spec.containers[name=app].image"
        );
        assert_eq!(path.pointer(), "/spec/template/spec/containers/1/image");
    }

    #[test]
    fn keys_with_dots_or_slashes_are_quoted_and_escaped() {
        let path = FieldPath::fields(["metadata", "labels", "app.kubernetes.io/name"]);
        assert_eq!(
            path.to_string(),
            "metadata.labels[\"app.kubernetes.io/name\"]"
        );
        assert_eq!(path.pointer(), "/metadata/labels/app.kubernetes.io~1name");
    }

    #[test]
    fn composite_keys_and_set_values_print_all_their_parts() {
        let ports = FieldPath::fields(["ports"]).child(Segment::Keyed {
            keys: vec![
                ("containerPort".into(), json!(80)),
                ("protocol".into(), json!("TCP")),
            ],
            index: 0,
        });
        assert_eq!(ports.to_string(), "ports[containerPort=80,protocol=TCP]");
        let finalizer = FieldPath::fields(["metadata", "finalizers"]).child(Segment::Value {
            value: json!("x"),
            index: 2,
        });
        assert_eq!(finalizer.to_string(), "metadata.finalizers[=x]");
        assert_eq!(finalizer.pointer(), "/metadata/finalizers/2");
    }
}
