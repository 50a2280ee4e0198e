//! Parsing manifest files into objects that remember their origin.

use std::fmt;
use std::path::PathBuf;

use serde_json::Value;
use tether_core::ObjectRef;

/// Where a desired object was declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// File path relative to the rendered directory.
    pub file: PathBuf,
    /// 0-based index of the document within the file's YAML stream.
    pub document: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (document {})",
            self.file.display(),
            self.document + 1
        )
    }
}

/// One desired object and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub id: ObjectRef,
    pub object: Value,
    pub origin: Origin,
}

/// Why a source could not be rendered. Nothing is partially rendered: any
/// error means no desired state at all.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
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
    #[error("{id} is declared twice: in {first} and in {second}")]
    Duplicate {
        id: Box<ObjectRef>,
        first: Box<Origin>,
        second: Box<Origin>,
    },
}

/// Parses a YAML (or JSON) stream of documents. Empty documents are skipped;
/// `kind: List` documents are flattened into their items.
pub fn parse_documents(
    path: &std::path::Path,
    text: &str,
) -> Result<Vec<(usize, Value)>, SourceError> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|error| SourceError::Parse {
            path: path.to_path_buf(),
            line: error.location().map(|l| l.line() as usize).unwrap_or(0),
            message: first_line(&error.to_string()),
        })?;
    let mut objects = Vec::new();
    for (index, document) in documents.into_iter().enumerate() {
        if document.is_null() {
            continue;
        }
        let is_list = document.get("kind").and_then(Value::as_str) == Some("List")
            || document
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|kind| kind.ends_with("List") && document.get("items").is_some());
        match (is_list, document.get("items").and_then(Value::as_array)) {
            (true, Some(items)) => objects.extend(items.iter().cloned().map(|item| (index, item))),
            _ => objects.push((index, document)),
        }
    }
    Ok(objects)
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or(text).to_string()
}
