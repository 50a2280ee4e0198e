//! The module graph of a crate, read from its sources, and its cycles.
//!
//! A module depends on another when its code (tests aside) names a path in
//! it: `use crate::sync::SyncError`, `super::waves::wait`, `crate::drift::X`
//! in an expression. Dependencies are compared between siblings: a path
//! from `break_glass::lifecycle` into `drift::assess` is an edge
//! `break_glass → drift` at the crate root; one from `adopt::write` into
//! `adopt::helm` is `write → helm` inside `adopt`. A module and its own
//! parent or children do not count (a folder may re-export its files, and
//! a file may use what its folder shares). Doc comments and `#[cfg(test)]
//! mod tests` are left out: they are not dependencies of the running code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path from the crate root: `["break_glass", "lifecycle"]`.
pub type ModulePath = Vec<String>;

/// Every file module under `src` (a crate's `src/` folder) and the sibling
/// dependencies between them.
#[derive(Debug, Default)]
pub struct ModuleGraph {
    pub modules: BTreeSet<ModulePath>,
    /// `(from, to)` siblings, each with one place that makes the edge.
    pub edges: BTreeMap<(ModulePath, ModulePath), String>,
}

impl ModuleGraph {
    /// Reads the crate whose sources are in `src`.
    pub fn read(src: &Path) -> ModuleGraph {
        let files = rust_files(src);
        let mut graph = ModuleGraph::default();
        for file in &files {
            graph.modules.insert(module_of(src, file));
        }
        for file in &files {
            let from = module_of(src, file);
            let text = std::fs::read_to_string(file).expect("a readable source file");
            for (line, path) in referenced_paths(&from, &code_only(&text)) {
                let Some(to) = graph.resolve(&path) else {
                    continue;
                };
                if let Some(edge) = sibling_edge(&from, &to) {
                    let shown = file
                        .strip_prefix(src.parent().unwrap_or(src))
                        .unwrap_or(file);
                    let place = format!("{}:{line}", shown.display());
                    graph.edges.entry(edge).or_insert(place);
                }
            }
        }
        graph
    }

    /// The longest known module that `path` starts with.
    fn resolve(&self, path: &[String]) -> Option<ModulePath> {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|prefix| self.modules.contains(prefix))
    }

    /// Panics listing every cycle among the modules of the crate in
    /// `crate_dir` (its `src/`), naming the crate as `name`.
    pub fn assert_no_cycles(crate_dir: &str, name: &str) {
        let cycles = ModuleGraph::read(&Path::new(crate_dir).join("src")).cycles();
        assert!(
            cycles.is_empty(),
            "module cycles in {name}:\n{}",
            cycles.join("\n")
        );
    }

    /// Every cycle, each as the modules in order with one place per edge:
    /// `sync → waves (src/sync.rs:12) → sync (src/waves.rs:9)`.
    pub fn cycles(&self) -> Vec<String> {
        let mut next: BTreeMap<&ModulePath, Vec<&ModulePath>> = BTreeMap::new();
        for (from, to) in self.edges.keys() {
            next.entry(from).or_default().push(to);
        }
        let mut found = BTreeSet::new();
        for start in next.keys() {
            // The shortest way back to `start`, by breadth-first search.
            let mut came_from: BTreeMap<&ModulePath, &ModulePath> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([*start]);
            let mut closing = None;
            while let Some(at) = queue.pop_front() {
                for &to in next.get(at).map(Vec::as_slice).unwrap_or_default() {
                    if to == *start {
                        closing = Some(at);
                        break;
                    }
                    if !came_from.contains_key(to) {
                        came_from.insert(to, at);
                        queue.push_back(to);
                    }
                }
                if closing.is_some() {
                    break;
                }
            }
            let Some(mut at) = closing else { continue };
            let mut cycle = vec![*start];
            while at != *start {
                cycle.push(at);
                at = came_from[at];
            }
            cycle[1..].reverse();
            cycle.push(*start);
            // One entry per cycle, whatever module it was found from.
            let mut members: Vec<&ModulePath> = cycle[..cycle.len() - 1].to_vec();
            members.sort();
            found.insert((members, self.describe(&cycle)));
        }
        let mut seen = BTreeSet::new();
        found
            .into_iter()
            .filter(|(members, _)| seen.insert(members.clone()))
            .map(|(_, text)| text)
            .collect()
    }

    fn describe(&self, cycle: &[&ModulePath]) -> String {
        let mut text = cycle[0].join("::");
        for pair in cycle.windows(2) {
            let place = &self.edges[&(pair[0].clone(), pair[1].clone())];
            text.push_str(&format!(" → {} ({place})", pair[1].join("::")));
        }
        text
    }
}

/// The edge between the two siblings under `from` and `to`'s deepest
/// common ancestor; `None` when one contains the other.
fn sibling_edge(from: &[String], to: &[String]) -> Option<(ModulePath, ModulePath)> {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    if common == from.len() || common == to.len() {
        return None;
    }
    Some((from[..=common].to_vec(), to[..=common].to_vec()))
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("a readable source folder")
        .map(|entry| entry.expect("a readable folder entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            // `src/bin` holds binaries, not modules of the library.
            if path.file_name().is_some_and(|name| name != "bin") {
                files.extend(rust_files(&path));
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

/// `src/break_glass/mod.rs` → `break_glass`; `src/lib.rs` → the root.
fn module_of(src: &Path, file: &Path) -> ModulePath {
    let relative = file.strip_prefix(src).expect("a file under src");
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The text without comments and without a trailing `#[cfg(test)] mod
/// tests`.
fn code_only(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every module path the code of module `from` names, absolute, with its
/// line: the leaves of each `use` tree, and `crate::`/`super::`/`self::`
/// paths anywhere else.
fn referenced_paths(from: &[String], code: &str) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    let mut rest = code;
    let mut offset = 0;
    while let Some(at) = find_use(rest) {
        let start = at + "use ".len();
        let end = rest[start..].find(';').map_or(rest.len(), |e| start + e);
        let line = code[..offset + at].matches('\n').count() + 1;
        for path in expand_use(&rest[start..end]) {
            if let Some(path) = absolute(from, &path) {
                found.push((line, path));
            }
        }
        offset += end;
        rest = &rest[end..];
    }
    for (index, line) in code.lines().enumerate() {
        if line.trim_start().starts_with("use ") || line.contains("pub use ") {
            continue;
        }
        for path in inline_paths(line) {
            if let Some(path) = absolute(from, &path) {
                found.push((index + 1, path));
            }
        }
    }
    found
}

/// The next `use` statement (at a word boundary).
fn find_use(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = text[from..].find("use ") {
        let at = from + at;
        let before = text[..at].chars().next_back();
        if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// `crate::{a::{b, c}, d as e}` → `[crate a b] [crate a c] [crate d]`.
fn expand_use(tree: &str) -> Vec<Vec<String>> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    expand(&tree, Vec::new(), &mut out);
    out
}

fn expand(tree: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let mut path = prefix;
        path.extend(segments(&tree[..open]));
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        for part in split_top_level(inner) {
            expand(part, path.clone(), out);
        }
    } else {
        let tree = tree.split(" as ").next().unwrap_or(tree);
        let mut path = prefix;
        path.extend(segments(tree));
        if !path.is_empty() {
            out.push(path);
        }
    }
}

fn segments(text: &str) -> Vec<String> {
    text.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "*")
        .map(str::to_string)
        .collect()
}

/// Splits on the commas that are not inside braces.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// `crate::a::b`, `super::super::a`, `self::a` paths in one line of code.
fn inline_paths(line: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for anchor in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = line[from..].find(anchor) {
            let at = from + at;
            from = at + anchor.len();
            let before = line[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let end = line[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(line.len(), |e| at + e);
            paths.push(segments(&line[at..end]));
        }
    }
    paths
}

/// `path` from the crate root, or `None` for another crate's path.
fn absolute(from: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = from.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        // A child module named directly (`use lifecycle::plan` in its
        // folder) is a parent–child path and never an edge; anything else
        // names another crate.
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "tether-modules-{}-{}",
            std::process::id(),
            files.len()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in files {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    /// The one cycle in a crate of `files`; fails if there is not exactly one.
    fn only_cycle(files: &[(&str, &str)]) -> String {
        let cycles = ModuleGraph::read(&tree(files)).cycles();
        assert_eq!(cycles.len(), 1, "{cycles:?}");
        cycles.into_iter().next().unwrap()
    }

    #[test]
    fn a_use_tree_expands_to_its_leaves() {
        assert_eq!(
            expand_use("crate::{a::{b, c as d}, e::*}"),
            [
                vec!["crate", "a", "b"],
                vec!["crate", "a", "c"],
                vec!["crate", "e"]
            ]
        );
    }

    #[test]
    fn two_siblings_that_use_each_other_are_a_cycle_named_with_its_places() {
        let cycle = only_cycle(&[
            ("lib.rs", "pub mod sync;\npub mod waves;\n"),
            ("sync.rs", "use crate::waves::wait;\n"),
            ("waves.rs", "fn f() { crate::sync::run(); }\n"),
        ]);
        assert!(cycle.starts_with("sync → waves ("), "{cycle}");
        assert!(cycle.contains("sync.rs:1") && cycle.contains("waves.rs:1"));
    }

    #[test]
    fn a_cycle_through_folders_is_found_between_the_top_level_siblings() {
        let cycle = only_cycle(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            ("a/mod.rs", "mod x;\n"),
            ("a/x.rs", "use super::super::b::thing;\n"),
            ("b.rs", "use crate::c::{one, two};\n"),
            ("c.rs", "use crate::a::x::go;\n"),
        ]);
        assert!(cycle.starts_with("a → b"), "{cycle}");
    }

    #[test]
    fn a_folder_and_its_files_tests_and_doc_links_make_no_cycle() {
        let src = tree(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            (
                "a/mod.rs",
                "mod x;\npub use x::Thing;\npub struct Shared;\n",
            ),
            ("a/x.rs", "use super::Shared;\n/// See [`crate::b::B`].\n"),
            (
                "b.rs",
                "use crate::a::Thing;\n#[cfg(test)]\nmod tests {\n    use crate::a::x;\n}\n",
            ),
        ]);
        assert_eq!(ModuleGraph::read(&src).cycles(), Vec::<String>::new());
    }
}
