//! Editing one object of a manifest file in place.
//!
//! Each field edit is planned as leaf changes against the object's current
//! value (a changed mapping becomes one change per changed key, a list of
//! named elements one change per element), and each leaf change is one
//! splice of the text at the spans the parser reports. Everything outside
//! the spliced ranges — comments, blank lines, key order, quoting, other
//! documents — stays byte for byte.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::path::{Selector, Step, build, keyed_position};
use super::scalar::{self, Flavor};
use super::tree::{self, Entry, Kind, Node, Text};
use crate::manifest::parse_file;

/// A field to write: its path and its new value (`None` removes it).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldEdit {
    pub path: Selector,
    pub value: Option<Value>,
}

/// Why a file could not be edited; names the file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {message}", file.display())]
pub struct EditError {
    pub file: PathBuf,
    /// 1-based; 0 when the error is about the whole file.
    pub line: usize,
    pub message: String,
}

/// Applies `edits` to the object declared in document `document` (0-based
/// among non-empty documents; item `item` of a `List`) of the file `file`
/// whose text is `text`, and returns the new text. `.json` files get JSON
/// spellings for new values.
pub fn edit_file(
    file: &Path,
    text: &str,
    document: usize,
    item: Option<usize>,
    edits: &[FieldEdit],
) -> Result<String, EditError> {
    let flavor = if file.extension().is_some_and(|e| e == "json") {
        Flavor::Json
    } else {
        Flavor::Yaml
    };
    let error = |line: usize, message: String| EditError {
        file: file.to_path_buf(),
        line,
        message,
    };
    let object = current_object(file, text, document, item)?;
    let mut changes = Vec::new();
    for edit in edits {
        leaves(
            &edit.path,
            edit.path.get(&object),
            edit.value.as_ref(),
            &mut changes,
        );
    }
    let mut text = text.to_string();
    for (path, value) in changes {
        let splice = {
            let index = Text::new(&text);
            let roots = tree::documents(&index).map_err(|e| error(e.line, e.message))?;
            let root = target(&index, &roots, document, item).map_err(|m| error(0, m))?;
            let editor = Editor {
                text: &index,
                flavor,
            };
            editor
                .plan(root, path.steps(), value)
                .map_err(|(offset, message)| {
                    let line = offset.map_or(0, |o| index.line_number(o));
                    error(line, format!("{path}: {message}"))
                })?
        };
        if let Some(Splice {
            start,
            end,
            text: new,
        }) = splice
        {
            text.replace_range(start..end, &new);
        }
    }
    Ok(text)
}

fn current_object(
    file: &Path,
    text: &str,
    document: usize,
    item: Option<usize>,
) -> Result<Value, EditError> {
    let objects = parse_file(file, text.as_bytes()).map_err(|error| EditError {
        file: file.to_path_buf(),
        line: 0,
        message: error.to_string(),
    })?;
    objects
        .into_iter()
        .find(|(origin, _)| origin.document == document && origin.item == item)
        .map(|(_, object)| object)
        .ok_or_else(|| EditError {
            file: file.to_path_buf(),
            line: 0,
            message: format!("has no document {}{}", document + 1, item_text(item)),
        })
}

fn item_text(item: Option<usize>) -> String {
    item.map(|i| format!(" item {}", i + 1)).unwrap_or_default()
}

/// The leaf changes that turn `old` into `new` at `path`.
fn leaves(
    path: &Selector,
    old: Option<&Value>,
    new: Option<&Value>,
    out: &mut Vec<(Selector, Option<Value>)>,
) {
    match (old, new) {
        (old, new) if old == new => {}
        (_, None) => out.push((path.clone(), None)),
        (Some(Value::Object(old)), Some(Value::Object(new))) => {
            for (key, value) in new {
                leaves(
                    &path.child(Step::Field(key.clone())),
                    old.get(key),
                    Some(value),
                    out,
                );
            }
            for key in old.keys().filter(|key| !new.contains_key(*key)) {
                out.push((path.child(Step::Field(key.clone())), None));
            }
        }
        (Some(Value::Array(old)), Some(Value::Array(new))) => {
            let name = |item: &Value| item.get("name").and_then(Value::as_str).map(str::to_string);
            let named = old.iter().chain(new).all(|item| name(item).is_some());
            if named {
                let step = |n: String| Step::Keyed(vec![("name".into(), n)]);
                for item in new {
                    let n = name(item).expect("named");
                    let before = old.iter().find(|o| name(o).as_deref() == Some(&n));
                    leaves(&path.child(step(n)), before, Some(item), out);
                }
                for item in old {
                    let n = name(item).expect("named");
                    if !new.iter().any(|o| name(o).as_deref() == Some(&n)) {
                        out.push((path.child(step(n)), None));
                    }
                }
            } else if old.len() == new.len() {
                for (index, (before, after)) in old.iter().zip(new).enumerate() {
                    leaves(
                        &path.child(Step::Index(index)),
                        Some(before),
                        Some(after),
                        out,
                    );
                }
            } else {
                out.push((path.clone(), Some(Value::Array(new.clone()))));
            }
        }
        (_, Some(new)) => out.push((path.clone(), Some(new.clone()))),
    }
}

/// The root node of the edited object.
fn target<'n>(
    text: &Text<'_>,
    roots: &'n [Node],
    document: usize,
    item: Option<usize>,
) -> Result<&'n Node, String> {
    let root = roots
        .iter()
        .filter(|root| !root.is_null())
        .nth(document)
        .ok_or_else(|| format!("has no document {}", document + 1))?;
    let Some(item) = item else {
        return Ok(root);
    };
    let items = match &root.kind {
        Kind::Map { entries, .. } => entries.iter().find(|e| e.key == "items"),
        _ => None,
    };
    match items.map(|e| &e.value.kind) {
        Some(Kind::Seq { items, .. }) => items.get(item).ok_or_else(|| {
            format!(
                "line {}: the List has no item {}",
                text.line_number(root.start),
                item + 1
            )
        }),
        _ => Err(format!("document {} is not a List", document + 1)),
    }
}

/// One replacement of a byte range.
struct Splice {
    start: usize,
    end: usize,
    text: String,
}

/// Where a node sits: what holds it, at which position.
#[derive(Clone, Copy)]
enum Slot<'n> {
    Root,
    Entry(&'n Node, usize),
    Item(&'n Node, usize),
}

type Failure = (Option<usize>, String);

struct Editor<'t, 'a> {
    text: &'t Text<'a>,
    flavor: Flavor,
}

impl Editor<'_, '_> {
    /// The splice that sets (or removes) the field at `steps` below `root`.
    fn plan(
        &self,
        root: &Node,
        steps: &[Step],
        value: Option<Value>,
    ) -> Result<Option<Splice>, Failure> {
        let mut chain: Vec<Slot<'_>> = vec![Slot::Root];
        let mut node = root;
        for (depth, step) in steps.iter().enumerate() {
            match child(node, step) {
                Some((slot, next)) => {
                    chain.push(slot);
                    node = next;
                }
                None => {
                    let Some(value) = value else {
                        return Ok(None);
                    };
                    let rest = &steps[depth..];
                    if node.is_null() {
                        let built = build(rest, value).map_err(|m| (Some(node.start), m))?;
                        let slot = *chain.last().expect("the root is in the chain");
                        return self.replace(slot, node, &built).map(Some);
                    }
                    return self.insert(node, rest, value).map(Some);
                }
            }
        }
        match value {
            Some(value) => {
                let slot = *chain.last().expect("the root is in the chain");
                self.replace(slot, node, &value).map(Some)
            }
            None => self.remove(&chain).map(Some),
        }
    }

    fn insert(&self, node: &Node, steps: &[Step], value: Value) -> Result<Splice, Failure> {
        let at = Some(node.start);
        let built = build(steps, value).map_err(|m| (at, m))?;
        match (&node.kind, &steps[0]) {
            (Kind::Map { entries, close }, Step::Field(key)) => {
                let child = built.get(key).cloned().unwrap_or_default();
                match close {
                    Some(close) => {
                        let separator = if entries.is_empty() { "" } else { ", " };
                        let key = self.key(key);
                        let value = scalar::flow(&child, self.flavor);
                        Ok(insert_at(*close, format!("{separator}{key}: {value}")))
                    }
                    None => {
                        let indent = self.text.column(entries[0].key_start);
                        Ok(self.insert_lines(node.end, self.entry_lines(key, &child, indent)))
                    }
                }
            }
            (Kind::Seq { items, close }, step) if !matches!(step, Step::Field(_)) => {
                if let Step::Index(index) = step
                    && *index != items.len()
                {
                    return Err((at, format!("the list has no position {index}")));
                }
                let element = built.as_array().and_then(|a| a.first()).cloned();
                let element = element.unwrap_or_default();
                match close {
                    Some(close) => {
                        let separator = if items.is_empty() { "" } else { ", " };
                        let element = scalar::flow(&element, self.flavor);
                        Ok(insert_at(*close, format!("{separator}{element}")))
                    }
                    None => {
                        let dash = self.dash_column(&items[0]);
                        let lines = scalar::block(&Value::Array(vec![element]), dash);
                        Ok(self.insert_lines(node.end, lines))
                    }
                }
            }
            (Kind::Alias, _) => Err((at, "goes through a YAML alias; edit it by hand".into())),
            _ => Err((at, format!("the file has a {} here", describe(node)))),
        }
    }

    fn replace(&self, slot: Slot<'_>, node: &Node, value: &Value) -> Result<Splice, Failure> {
        if matches!(node.kind, Kind::Alias) {
            return Err((Some(node.start), "is a YAML alias; edit it by hand".into()));
        }
        let inline = !node.is_block() && !node.is_null();
        // Inside a flow collection (`{…}`, `[…]`) only flow text fits, even
        // where a null is replaced by a mapping (found by fuzzing: block
        // lines there broke the file).
        let in_flow = match slot {
            Slot::Entry(parent, _) | Slot::Item(parent, _) => !parent.is_block(),
            Slot::Root => false,
        };
        if inline || in_flow || self.flavor == Flavor::Json {
            let text = match &node.kind {
                Kind::Scalar { style, .. } => scalar::replacing(value, *style, self.flavor),
                _ => scalar::flow(value, self.flavor),
            };
            return Ok(Splice {
                start: node.start,
                end: node.end,
                text,
            });
        }
        // A block node (or nothing at all): rewrite everything after the
        // key's colon or the item's dash.
        let (start, indent) = match slot {
            Slot::Entry(map, index) => {
                let entry = &entries(map)[index];
                let key_column = self.text.column(entry.key_start);
                (
                    entry.colon_end,
                    self.block_indent(node).unwrap_or(key_column + 2),
                )
            }
            Slot::Item(_, _) => {
                let dash = self.dash_column(node);
                let start = self.text.line_start(self.text.line_of(node.start)) + dash + 1;
                (start, self.block_indent(node).unwrap_or(dash + 2))
            }
            Slot::Root => {
                return Err((Some(node.start), "cannot replace a whole document".into()));
            }
        };
        let text = match value {
            Value::String(text) if text.contains('\n') => literal(text, indent)
                .unwrap_or_else(|| format!(" {}", scalar::flow(value, self.flavor))),
            value if scalar::is_inline(value) => format!(" {}", scalar::flow(value, self.flavor)),
            value => format!("\n{}", scalar::block(value, indent).join("\n")),
        };
        Ok(Splice {
            start,
            end: node.end.max(start),
            text,
        })
    }

    fn remove(&self, chain: &[Slot<'_>]) -> Result<Splice, Failure> {
        let slot = *chain.last().expect("a removed field has a slot");
        let (container, index) = match slot {
            Slot::Root => return Err((None, "cannot remove a whole document".into())),
            Slot::Entry(node, index) | Slot::Item(node, index) => (node, index),
        };
        let len = match &container.kind {
            Kind::Map { entries, .. } => entries.len(),
            Kind::Seq { items, .. } => items.len(),
            _ => 0,
        };
        if len == 1 && chain.len() > 2 {
            // Leave no empty mapping or list behind.
            return self.remove(&chain[..chain.len() - 1]);
        }
        let span = |i: usize| -> (usize, usize) {
            match &container.kind {
                Kind::Map { entries, .. } => {
                    let entry = &entries[i];
                    (entry.key_start, entry.value.end.max(entry.colon_end))
                }
                Kind::Seq { items, .. } => (items[i].start, items[i].end),
                _ => unreachable!("containers are mappings or lists"),
            }
        };
        let (start, end) = span(index);
        let flow = matches!(
            &container.kind,
            Kind::Map { close: Some(_), .. } | Kind::Seq { close: Some(_), .. }
        );
        let (start, end) = if flow {
            if index + 1 < len {
                (start, span(index + 1).0)
            } else if index > 0 {
                (span(index - 1).1, end)
            } else {
                (start, end)
            }
        } else {
            let line = self.text.line_of(start);
            let before = &self.text.text[self.text.line_start(line)..start];
            let on_dash_line =
                matches!(container.kind, Kind::Map { .. }) && before.trim_start().starts_with('-');
            if on_dash_line && index + 1 < len {
                (start, span(index + 1).0)
            } else {
                let last = self.text.line_of(end);
                (self.text.line_start(line), self.text.next_line_start(last))
            }
        };
        Ok(Splice {
            start,
            end,
            text: String::new(),
        })
    }

    fn key(&self, key: &str) -> String {
        match self.flavor {
            Flavor::Yaml => scalar::string(key),
            Flavor::Json => serde_json::to_string(key).expect("a string serializes"),
        }
    }

    fn entry_lines(&self, key: &str, value: &Value, indent: usize) -> Vec<String> {
        let pad = " ".repeat(indent);
        let key = self.key(key);
        match value {
            Value::String(text) if text.contains('\n') => match literal(text, indent + 2) {
                Some(block) => vec![format!("{pad}{key}:{block}")],
                None => vec![format!("{pad}{key}: {}", scalar::flow(value, self.flavor))],
            },
            value if scalar::is_inline(value) => {
                vec![format!("{pad}{key}: {}", scalar::flow(value, self.flavor))]
            }
            value => {
                let mut lines = vec![format!("{pad}{key}:")];
                lines.extend(scalar::block(value, indent + 2));
                lines
            }
        }
    }

    /// Lines inserted after the line holding `after`.
    fn insert_lines(&self, after: usize, lines: Vec<String>) -> Splice {
        let at = self.text.next_line_start(self.text.line_of(after));
        let mut text = lines.join("\n");
        text.push('\n');
        if at == self.text.text.len() && !self.text.text.ends_with('\n') {
            text.insert(0, '\n');
        }
        insert_at(at, text)
    }

    /// The column of the `-` before a block list item.
    fn dash_column(&self, item: &Node) -> usize {
        let line = self.text.line_of(item.start);
        let before = &self.text.text[self.text.line_start(line)..item.start];
        before
            .rfind('-')
            .unwrap_or_else(|| self.text.column(item.start).saturating_sub(2))
    }

    /// The indentation a block node is written at, to keep it when the
    /// node is rewritten.
    fn block_indent(&self, node: &Node) -> Option<usize> {
        match &node.kind {
            Kind::Seq { items, close: None } => items.first().map(|i| self.dash_column(i)),
            Kind::Map { close: None, .. } | Kind::Scalar { .. } if node.is_block() => {
                Some(self.text.column(node.start))
            }
            _ => None,
        }
    }
}

fn child<'n>(node: &'n Node, step: &Step) -> Option<(Slot<'n>, &'n Node)> {
    match (&node.kind, step) {
        (Kind::Map { entries, .. }, Step::Field(key)) => {
            let index = entries.iter().position(|e| &e.key == key)?;
            Some((Slot::Entry(node, index), &entries[index].value))
        }
        (Kind::Seq { items, .. }, step) => {
            let index = match step {
                Step::Index(index) => (*index < items.len()).then_some(*index),
                Step::Value(text) => items.iter().position(|item| scalar_is(item, text)),
                Step::Keyed(keys) => keyed_position(items.len(), keys, |index, key| {
                    entries(&items[index])
                        .iter()
                        .find(|e| e.key == key)
                        .and_then(|e| match &e.value.kind {
                            Kind::Scalar { value, .. } => Some(value.clone()),
                            _ => None,
                        })
                }),
                Step::Field(_) => None,
            }?;
            Some((Slot::Item(node, index), &items[index]))
        }
        _ => None,
    }
}

fn scalar_is(node: &Node, text: &str) -> bool {
    matches!(&node.kind, Kind::Scalar { value, .. } if value == text)
}

fn entries(node: &Node) -> &[Entry] {
    match &node.kind {
        Kind::Map { entries, .. } => entries,
        _ => &[],
    }
}

fn describe(node: &Node) -> &'static str {
    match &node.kind {
        Kind::Scalar { .. } => "scalar",
        Kind::Map { .. } => "mapping",
        Kind::Seq { .. } => "list",
        Kind::Alias => "alias",
    }
}

fn insert_at(at: usize, text: String) -> Splice {
    Splice {
        start: at,
        end: at,
        text,
    }
}

/// A multi-line string as a literal block (` |` and its lines at `indent`),
/// when one can say it exactly.
fn literal(text: &str, indent: usize) -> Option<String> {
    let body = text.strip_suffix('\n');
    let (body, chomp) = match body {
        Some(body) if !body.ends_with('\n') => (body, ""),
        None => (text, "-"),
        Some(_) => return None,
    };
    let exact = !body.starts_with([' ', '\t', '\n'])
        && !body.contains(['\r', '\t'])
        && body.lines().all(|line| line.trim_end() == line);
    if !exact || body.is_empty() {
        return None;
    }
    let pad = " ".repeat(indent);
    let lines: Vec<String> = body
        .split('\n')
        .map(|line| {
            if line.is_empty() {
                String::new()
            } else {
                format!("{pad}{line}")
            }
        })
        .collect();
    Some(format!(" |{chomp}\n{}", lines.join("\n")))
}
