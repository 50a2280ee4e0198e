//! What an import could not carry over, and where: one [`Finding`] per
//! field, named by the object first and located in its file.
//!
//! Conversions read their input through [`Fields`], which hands out each
//! field once; whatever a conversion leaves behind is reported as not
//! mapped, so a field nobody thought of is never dropped silently.

use std::fmt;

use serde_json::{Map, Value};

use super::Input;

/// How a field fared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Tether has no equivalent: the field is left out.
    NotMapped,
    /// Carried over, but Tether reads it differently, or something must be
    /// done by hand for it to work as before.
    Note,
}

/// One field an import could not carry over as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The file the object came from.
    pub file: String,
    /// The line of the field (or of the object) in that file, from 1.
    pub line: usize,
    /// `Kind namespace/name` of the object read.
    pub object: String,
    /// The field's path (`spec.syncPolicy.retry.backoff.factor`).
    pub field: String,
    pub verdict: Verdict,
    /// Why, and what to do instead.
    pub why: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Finding {
            file,
            line,
            object,
            field,
            why,
            ..
        } = self;
        match self.verdict {
            Verdict::NotMapped => write!(
                f,
                "{file}:{line}: {object}: field {field} not mapped: {why}"
            ),
            Verdict::Note => write!(f, "{file}:{line}: {object}: field {field}: note: {why}"),
        }
    }
}

/// The findings about one object being converted.
pub(crate) struct Report<'a> {
    input: &'a Input,
    /// `Kind namespace/name`, as findings name the object.
    pub object: String,
    /// Prepended to field paths to find them in the file (an
    /// ApplicationSet's template holds its Applications' fields).
    pub located_under: String,
    pub findings: Vec<Finding>,
}

impl<'a> Report<'a> {
    /// The findings about `input`'s object, named as findings name it.
    pub fn of(input: &'a Input) -> Self {
        Self::new(input, super::object_name(&input.object))
    }

    pub fn new(input: &'a Input, object: String) -> Self {
        Report {
            input,
            object,
            located_under: String::new(),
            findings: Vec::new(),
        }
    }

    pub fn not_mapped(&mut self, field: &str, why: impl Into<String>) {
        self.push(field, Verdict::NotMapped, why.into());
    }

    pub fn note(&mut self, field: &str, why: impl Into<String>) {
        self.push(field, Verdict::Note, why.into());
    }

    fn push(&mut self, field: &str, verdict: Verdict, why: String) {
        let located = match self.located_under.as_str() {
            "" => field.to_string(),
            under => format!("{under}.{field}"),
        };
        self.findings.push(Finding {
            file: self.input.file.clone(),
            line: self.input.line + line_of(&self.input.text, &located),
            object: self.object.clone(),
            field: field.to_string(),
            verdict,
            why,
        });
    }

    /// Reports every field `fields` still holds as not mapped: with the
    /// reason `reasons` gives for its key, else `otherwise`.
    pub fn leftovers(&mut self, fields: Fields, reasons: &[(&str, &str)], otherwise: &str) {
        for (key, _) in fields.map {
            let why = reasons
                .iter()
                .find(|(name, _)| *name == key)
                .map_or(otherwise, |(_, why)| why);
            let field = join(&fields.path, &key);
            self.not_mapped(&field, why);
        }
    }
}

/// The fields of one mapping of the input, handed out once each.
#[derive(Debug, Default)]
pub(crate) struct Fields {
    /// Where the mapping is (`spec.syncPolicy`).
    pub path: String,
    /// Whether the mapping was given at all (`automated: {}` is).
    pub present: bool,
    map: Map<String, Value>,
}

impl Fields {
    /// The fields of `value` (none unless it is a mapping), found at `path`.
    pub fn of(value: Option<&Value>, path: &str) -> Fields {
        Fields {
            path: path.to_string(),
            present: value.is_some_and(|value| !value.is_null()),
            map: value
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        }
    }

    /// The fields of `input`'s `spec`.
    pub fn spec(input: &Input) -> Fields {
        Fields::of(input.object.get("spec"), "spec")
    }

    /// Takes `key`, unless it is absent or null.
    pub fn take(&mut self, key: &str) -> Option<Value> {
        self.map.remove(key).filter(|value| !value.is_null())
    }

    /// Takes `key` as text (numbers and booleans written as YAML would).
    pub fn text(&mut self, key: &str) -> Option<String> {
        self.take(key).and_then(|value| match value {
            Value::String(text) => Some(text),
            Value::Number(number) => Some(number.to_string()),
            Value::Bool(flag) => Some(flag.to_string()),
            _ => None,
        })
    }

    /// Takes each of `keys` given as text, under the same key.
    pub fn texts(&mut self, keys: &[&str]) -> Map<String, Value> {
        keys.iter()
            .filter_map(|key| Some((key.to_string(), Value::String(self.text(key)?))))
            .collect()
    }

    pub fn flag(&mut self, key: &str) -> Option<bool> {
        self.take(key).and_then(|value| match value {
            Value::Bool(flag) => Some(flag),
            Value::String(text) => text.parse().ok(),
            _ => None,
        })
    }

    pub fn list(&mut self, key: &str) -> Vec<Value> {
        match self.take(key) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        }
    }

    /// Takes the mapping at `key`, as fields of their own.
    pub fn nested(&mut self, key: &str) -> Fields {
        let value = self.take(key);
        Fields::of(value.as_ref(), &join(&self.path, key))
    }

    /// The path of `key` in this mapping.
    pub fn at(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// Looks at `key` without taking it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key)
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Leaves out `key` without a finding (read elsewhere, or meaningless
    /// to Tether, such as `status`).
    pub fn drop(&mut self, key: &str) {
        self.map.remove(key);
    }
}

fn join(path: &str, key: &str) -> String {
    match path {
        "" => key.to_string(),
        path => format!("{path}.{key}"),
    }
}

/// The line of `path` (`spec.source.helm[0].values`, indices ignored) in
/// the YAML `text`, counted from 0: each key is looked for below the one
/// before it. A key not found leaves the line of the last one found (the
/// object's first line when none is).
pub fn line_of(text: &str, path: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = 0;
    let mut from = 0;
    for key in path.split('.') {
        let key = key.split('[').next().unwrap_or(key);
        let hit = lines.iter().enumerate().skip(from).find(|(_, line)| {
            let line = line.trim_start().trim_start_matches("- ");
            let line = line.trim_start_matches(['"', '\'']);
            line.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start_matches(['"', '\'']).starts_with(':'))
        });
        match hit {
            Some((index, _)) => {
                found = index;
                from = index + 1;
            }
            None => break,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_is_found_below_its_parents() {
        let text = "kind: Application\nspec:\n  source:\n    path: a\n  syncPolicy:\n    retry:\n      limit: 2\n";
        assert_eq!(line_of(text, "spec.syncPolicy.retry.limit"), 6);
        assert_eq!(line_of(text, "spec.source.path"), 3);
        assert_eq!(line_of(text, "spec.nowhere"), 1);
    }
}
