//! Parsing manifest files into objects that remember where they were declared.
//!
//! YAML is read the way kubectl reads it (YAML 1.1 style): `yes`, `on`, `y`
//! are `true`, `no`, `off`, `n` are `false`, and `0755` is octal. A stream is
//! split into documents on `---` lines so that every object knows the 1-based
//! line its document starts on; `tether adopt` edits files in place there.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tether_core::ObjectRef;
use tether_core::metadata::{MetadataError, check_metadata};

use crate::limits::{Budget, Limits, TooLarge, path_line};

/// Where a desired object was declared.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Origin {
    /// File path, relative to the repository root (or to the rendered local
    /// directory), or the renderer's name for renderer output.
    pub file: PathBuf,
    /// 0-based index among the file's non-empty documents.
    pub document: usize,
    /// 1-based line of the document's first content line (after `---`,
    /// blank lines and comments); 0 when unknown (renderer output).
    pub line: usize,
    /// 0-based index in the `items` of a `List` document, if it came from one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<usize>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}", self.line)?;
        } else {
            write!(f, " (document {})", self.document + 1)?;
        }
        if let Some(item) = self.item {
            write!(f, " (item {})", item + 1)?;
        }
        Ok(())
    }
}

/// One desired object and where it came from.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    pub id: ObjectRef,
    pub object: Value,
    pub origin: Origin,
}

/// Why manifests could not be read. Nothing is partially rendered: any error
/// means no desired state at all. None of these is retryable: the input has
/// to change.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{origin}: {source}")]
    NotAnObject {
        origin: Origin,
        #[source]
        source: tether_core::object::ObjectError,
    },
    /// An object the API server would refuse for its name, labels or
    /// annotations; `object` is its identity when that is printable.
    #[error("{origin}: {object}{source}")]
    Metadata {
        origin: Origin,
        object: String,
        #[source]
        source: tether_core::metadata::MetadataError,
    },
    #[error("{id} is declared twice: at {first} and at {second}")]
    Duplicate {
        id: Box<ObjectRef>,
        first: Box<Origin>,
        second: Box<Origin>,
    },
    #[error("{path}: {reason}")]
    Rejected { path: PathBuf, reason: String },
    #[error("invalid glob {glob:?}: {message}")]
    Glob { glob: String, message: String },
    /// A directory read as plain manifests that holds another renderer's
    /// files (a kustomization, a Helm chart): the error, and which renderer
    /// the directory needs.
    #[error("{error} — {hint}")]
    Misread {
        error: Box<ManifestError>,
        hint: String,
    },
    /// A file or a render is bigger than [`Limits`] allow.
    #[error(transparent)]
    TooLarge(#[from] TooLarge),
}

/// SHA-256 (hex) of `manifests`' objects in order; where they came from
/// (file and line) does not count, only what they ask of the cluster.
pub fn digest(manifests: &[Manifest]) -> String {
    let mut hasher = Sha256::new();
    for manifest in manifests {
        hasher.update(serde_json::to_vec(&manifest.object).unwrap_or_default());
        hasher.update([0]);
    }
    hex::encode(hasher.finalize())
}

/// Parses a file's bytes into its objects, each with its origin. `.json`
/// files are read as JSON (one or more concatenated values), anything else
/// as a YAML stream. Empty and comment-only documents are skipped and
/// `List` kinds (`List`, `ConfigMapList`, ...) are flattened into items.
/// The file alone is held to the default [`Limits`].
pub fn parse_file(path: &Path, bytes: &[u8]) -> Result<Vec<(Origin, Value)>, ManifestError> {
    parse_file_within(path, bytes, &mut Budget::new(Limits::default()))
}

/// [`parse_file`] as one file of a render that has `budget` left.
pub fn parse_file_within(
    path: &Path,
    bytes: &[u8],
    budget: &mut Budget,
) -> Result<Vec<(Origin, Value)>, ManifestError> {
    budget.file(path, bytes.len())?;
    parse(path, bytes, budget)
}

/// A renderer's output, as a YAML stream: not held to the file limit (the
/// renderer's output limit bounds it) but to the rest of `budget`.
pub(crate) fn parse_output(
    name: &Path,
    bytes: &[u8],
    budget: &mut Budget,
) -> Result<Vec<(Origin, Value)>, ManifestError> {
    budget.rendered(name, bytes.len())?;
    parse(name, bytes, budget)
}

fn parse(
    path: &Path,
    bytes: &[u8],
    budget: &mut Budget,
) -> Result<Vec<(Origin, Value)>, ManifestError> {
    let text = std::str::from_utf8(bytes).map_err(|error| ManifestError::Parse {
        path: path.to_path_buf(),
        line: line_of_offset(bytes, error.valid_up_to()),
        message: "not valid UTF-8".into(),
    })?;
    let documents = if path.extension().is_some_and(|e| e == "json") {
        json_documents(path, text, budget)?
    } else {
        yaml_documents(path, text, budget)?
    };
    let mut objects = Vec::new();
    for (document, (line, value)) in documents.into_iter().enumerate() {
        let origin = Origin {
            file: path.to_path_buf(),
            document,
            line,
            item: None,
        };
        let count = list_items(&value).map_or(1, Vec::len);
        budget.objects(&path_line(path, line), count)?;
        match list_items(&value) {
            Some(items) => objects.extend(items.iter().enumerate().map(|(i, item)| {
                let origin = Origin {
                    item: Some(i),
                    ..origin.clone()
                };
                (origin, item.clone())
            })),
            None => objects.push((origin, value)),
        }
    }
    Ok(objects)
}

/// The parsed objects as manifests, with identities checked.
pub fn identify(objects: Vec<(Origin, Value)>) -> Result<Vec<Manifest>, ManifestError> {
    objects
        .into_iter()
        .map(|(origin, object)| match ObjectRef::from_object(&object) {
            Ok(id) => match check_metadata(&id, &object) {
                Ok(()) => Ok(Manifest { id, object, origin }),
                Err(source) => Err(ManifestError::Metadata {
                    origin,
                    // A name that is itself the problem is shown quoted, in the message.
                    object: match source {
                        MetadataError::Name { .. } => String::new(),
                        _ => format!("{id}: "),
                    },
                    source,
                }),
            },
            Err(source) => Err(ManifestError::NotAnObject { origin, source }),
        })
        .collect()
}

fn list_items(value: &Value) -> Option<&Vec<Value>> {
    let kind = value.get("kind")?.as_str()?;
    let items = value.get("items")?.as_array()?;
    (kind == "List" || kind.ends_with("List")).then_some(items)
}

fn yaml_options(alias_nodes_left: usize) -> serde_saphyr::Options {
    serde_saphyr::options! {
        // kubectl (go-yaml v2) reads `0755` as octal and `yes`/`on` as booleans.
        legacy_octal_numbers: true,
        strict_booleans: false,
        with_snippet: false,
        // The alias budget is the render's, not the document's: what
        // earlier documents expanded is no longer available.
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: alias_nodes_left,
        },
    }
}

/// Splits a YAML stream on `---` / `...` lines and parses each non-empty
/// document, returning its first content line and value.
fn yaml_documents(
    path: &Path,
    text: &str,
    budget: &mut Budget,
) -> Result<Vec<(usize, Value)>, ManifestError> {
    let mut documents = Vec::new();
    for chunk in split_documents(text) {
        let Some(first_content) = chunk.first_content else {
            continue;
        };
        // Only a document with an alias can expand; one without is
        // bounded by its own size.
        let aliased = chunk.text.contains('*');
        let options = yaml_options(if aliased {
            budget.alias_nodes_left()
        } else {
            usize::MAX
        });
        let value: Value =
            serde_saphyr::from_str_with_options(&chunk.text, options).map_err(|error| {
                let line = error
                    .location()
                    .map(|l| chunk.start + l.line() as usize - 1)
                    .unwrap_or(first_content);
                let message = yaml_message(&error.to_string());
                if message.contains("alias replay limit") {
                    budget.alias_limit_error(path, line).into()
                } else {
                    ManifestError::Parse {
                        path: path.to_path_buf(),
                        line,
                        message,
                    }
                }
            })?;
        budget.document(path, first_content, &value, aliased)?;
        if !value.is_null() {
            documents.push((first_content, value));
        }
        // One document over the object limit is enough for the error.
        if documents.len() > budget.objects_left() {
            break;
        }
    }
    Ok(documents)
}

struct Chunk {
    /// 1-based line the chunk's text starts on.
    start: usize,
    /// 1-based line of the first line that is not blank, a comment or a marker.
    first_content: Option<usize>,
    text: String,
}

fn split_documents(text: &str) -> Vec<Chunk> {
    let new_chunk = |start| Chunk {
        start,
        first_content: None,
        text: String::new(),
    };
    let mut chunks = vec![new_chunk(1)];
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let start_marker = is_marker(line, "---");
        if start_marker || is_marker(line, "...") {
            chunks.push(new_chunk(number));
            if !start_marker {
                continue;
            }
        }
        let chunk = chunks.last_mut().expect("there is always a chunk");
        let content = if start_marker { &line[3..] } else { line };
        let trimmed = content.trim_start();
        if chunk.first_content.is_none() && !trimmed.is_empty() && !trimmed.starts_with('#') {
            chunk.first_content = Some(number);
        }
        chunk.text.push_str(line);
        chunk.text.push('\n');
    }
    chunks
}

fn is_marker(line: &str, marker: &str) -> bool {
    line.strip_prefix(marker)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r']))
}

fn json_documents(
    path: &Path,
    text: &str,
    budget: &mut Budget,
) -> Result<Vec<(usize, Value)>, ManifestError> {
    let mut documents = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<UniqueKeys>();
    let mut offset = 0;
    loop {
        let start = offset + (text[offset..].len() - text[offset..].trim_start().len());
        match stream.next() {
            None => return Ok(documents),
            Some(Ok(UniqueKeys(value))) => {
                offset = stream.byte_offset();
                let line = line_of_offset(text.as_bytes(), start);
                budget.document(path, line, &value, false)?;
                if !value.is_null() {
                    documents.push((line, value));
                }
                if documents.len() > budget.objects_left() {
                    return Ok(documents);
                }
            }
            Some(Err(error)) => {
                return Err(ManifestError::Parse {
                    path: path.to_path_buf(),
                    line: error.line(),
                    message: first_line(&error.to_string()),
                });
            }
        }
    }
}

/// A JSON value whose objects have no key twice: `serde_json` keeps the
/// last of duplicate keys, which would let `{"kind": "ConfigMap", "kind":
/// "Secret"}` mean something other than what a reader of the file sees.
struct UniqueKeys(Value);

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(UniqueKeysVisitor)
            .map(UniqueKeys)
    }
}

struct UniqueKeysVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueKeysVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(UniqueKeys(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let UniqueKeys(value) = map.next_value()?;
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format!("duplicate key {key:?}")));
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// The first line of a YAML error, without the parser's advice to its
/// programmer (`set DuplicateKeyPolicy in Options if acceptable`).
pub(crate) fn yaml_message(text: &str) -> String {
    first_line(text).replace(", set DuplicateKeyPolicy in Options if acceptable", "")
}

fn line_of_offset(bytes: &[u8], offset: usize) -> usize {
    1 + bytes[..offset].iter().filter(|b| **b == b'\n').count()
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(name: &str, text: &str) -> Vec<(Origin, Value)> {
        parse_file(Path::new(name), text.as_bytes()).unwrap()
    }

    #[test]
    fn each_document_knows_the_line_it_starts_on() {
        let text =
            "# leading comment\napiVersion: v1\nkind: A\n---\n\n# c\nkind: B\n--- {kind: C}\n";
        let lines: Vec<(usize, usize)> = parse("a.yaml", text)
            .iter()
            .map(|(o, _)| (o.document, o.line))
            .collect();
        assert_eq!(lines, vec![(0, 2), (1, 7), (2, 8)]);
    }

    #[test]
    fn empty_and_comment_only_documents_are_skipped() {
        let text = "---\n# only a comment\n---\n\n---\nkind: A\n...\n---\n~\n";
        let docs = parse("a.yaml", text);
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].1, json!({"kind": "A"}));
        assert_eq!(docs[0].0.line, 6);
    }

    #[test]
    fn yaml_1_1_words_are_read_as_kubectl_reads_them() {
        let text =
            "a: yes\nb: on\nc: y\nd: no\ne: off\nf: \"yes\"\ng: 0755\nh: 1.0\ni: ~\nj: 010_0\n";
        let (_, value) = parse("a.yaml", text).remove(0);
        assert_eq!(value["a"], json!(true));
        assert_eq!(value["b"], json!(true));
        assert_eq!(value["c"], json!(true));
        assert_eq!(value["d"], json!(false));
        assert_eq!(value["e"], json!(false));
        assert_eq!(value["f"], json!("yes"));
        assert_eq!(value["g"], json!(493));
        assert_eq!(value["i"], Value::Null);
    }

    #[test]
    fn list_kinds_are_flattened_with_item_indices() {
        let text = "kind: List\nitems:\n- {kind: A}\n- {kind: B}\n---\nkind: ConfigMapList\nitems: [{kind: C}]\n";
        let docs = parse("l.yaml", text);
        let items: Vec<_> = docs
            .iter()
            .map(|(o, v)| (o.item, o.line, v["kind"].clone()))
            .collect();
        assert_eq!(
            items,
            vec![
                (Some(0), 1, json!("A")),
                (Some(1), 1, json!("B")),
                (Some(0), 6, json!("C"))
            ]
        );
        assert_eq!(docs[1].0.to_string(), "l.yaml:1 (item 2)");
    }

    #[test]
    fn a_yaml_error_names_the_file_line_in_the_whole_stream() {
        let text = "kind: A\n---\nkind: B\nmetadata:\n  name: [unclosed\n";
        let error = parse_file(Path::new("apps/web.yaml"), text.as_bytes()).unwrap_err();
        let message = error.to_string();
        assert!(message.starts_with("apps/web.yaml:"), "{message}");
        let ManifestError::Parse { line, .. } = error else {
            panic!("{message}")
        };
        assert!((5..=6).contains(&line), "{message}");
    }

    #[test]
    fn json_files_may_hold_several_values_each_with_its_line() {
        let text = "{\"kind\": \"A\"}\n\n{\n \"kind\": \"B\"}\n";
        let lines: Vec<usize> = parse("a.json", text).iter().map(|(o, _)| o.line).collect();
        assert_eq!(lines, vec![1, 3]);
        let error = parse_file(Path::new("b.json"), b"{\n\"kind\": }\n").unwrap_err();
        assert!(error.to_string().starts_with("b.json:2: "), "{error}");
    }

    #[test]
    fn duplicate_mapping_keys_are_an_error() {
        let error = parse_file(Path::new("d.yaml"), b"kind: A\nkind: B\n").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("d.yaml:2: duplicate mapping key: kind"),
            "{error}"
        );
        assert!(!error.to_string().contains("DuplicateKeyPolicy"), "{error}");
        let error =
            parse_file(Path::new("d.json"), b"{\"kind\": \"A\",\n \"kind\": \"B\"}").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("d.json:2: duplicate key \"kind\""),
            "{error}"
        );
    }
}
