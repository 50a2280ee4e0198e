//! How much one source may render: the bounds that keep a hostile
//! repository from exhausting the controller's memory, and what one render
//! has used of them so far. All the files and documents of a render share
//! one [`Budget`], so forty small documents of aliases cannot each spend
//! what one may.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// How much one source may render: the bounds that keep a hostile
/// repository from exhausting the controller's memory. They apply to all
/// the files and documents of one render together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// No manifest file may be larger; checked before it is parsed.
    pub max_file_bytes: usize,
    /// The rendered objects of one source, as compact JSON, may not be
    /// larger in total.
    pub max_rendered_bytes: usize,
    /// No source may render more objects.
    pub max_objects: usize,
    /// The YAML documents that use aliases (`*name`) may expand to at most
    /// this many nodes in total, per source.
    pub max_alias_nodes: usize,
    /// The Git tree a source renders from (the application's directory, or
    /// the whole repository for renderers that may reach outside it) may
    /// hold at most this many files and links...
    pub max_tree_files: usize,
    /// ...of at most this many bytes together: it is read into memory.
    pub max_tree_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_file_bytes: 16 * MIB,
            max_rendered_bytes: 64 * MIB,
            max_objects: 10_000,
            max_alias_nodes: 200_000,
            max_tree_files: 200_000,
            max_tree_bytes: 512 * MIB,
        }
    }
}

const MIB: usize = 1024 * 1024;

/// What one render has used of its [`Limits`] so far.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    limits: Limits,
    rendered_bytes: usize,
    objects: usize,
    alias_nodes: usize,
}

impl Budget {
    pub fn new(limits: Limits) -> Budget {
        Budget {
            limits,
            ..Budget::default()
        }
    }

    /// Refuses a file before parsing if it alone is over the file limit or
    /// would take the render over its byte limit.
    pub(crate) fn file(&self, path: &Path, bytes: usize) -> Result<(), TooLarge> {
        let limit = self.limits.max_file_bytes;
        if bytes > limit {
            return Err(too_large(
                path,
                format!(
                    "is {}, more than the limit of {} for one file (not parsed)",
                    size(bytes),
                    size(limit)
                ),
            ));
        }
        self.rendered(path, bytes)
    }

    pub(crate) fn rendered(&self, path: &Path, more: usize) -> Result<(), TooLarge> {
        let limit = self.limits.max_rendered_bytes;
        if self.rendered_bytes.saturating_add(more) > limit {
            return Err(too_large(
                path,
                format!(
                    "the rendered objects exceed the limit of {} per source",
                    size(limit)
                ),
            ));
        }
        Ok(())
    }

    /// How many more objects the render may hold: a file with more
    /// documents than this is refused without parsing the rest.
    pub(crate) fn objects_left(&self) -> usize {
        self.limits.max_objects.saturating_sub(self.objects)
    }

    /// How many nodes aliases may still expand to.
    pub(crate) fn alias_nodes_left(&self) -> usize {
        self.limits.max_alias_nodes.saturating_sub(self.alias_nodes)
    }

    pub(crate) fn alias_limit_error(&self, path: &Path, line: usize) -> TooLarge {
        too_large(
            &path_line(path, line),
            format!(
                "YAML aliases expand to more than {} nodes (the limit for all the files of one source)",
                self.limits.max_alias_nodes
            ),
        )
    }

    /// Charges one parsed document (or renderer object) to the render.
    pub(crate) fn document(
        &mut self,
        path: &Path,
        line: usize,
        value: &Value,
        aliased: bool,
    ) -> Result<(), TooLarge> {
        let (bytes, nodes) = measure(value);
        if aliased {
            self.alias_nodes = self.alias_nodes.saturating_add(nodes);
            if self.alias_nodes > self.limits.max_alias_nodes {
                return Err(self.alias_limit_error(path, line));
            }
        }
        self.rendered(&path_line(path, line), bytes)?;
        self.rendered_bytes += bytes;
        Ok(())
    }

    /// Charges `count` objects to the render.
    pub(crate) fn objects(&mut self, path: &Path, count: usize) -> Result<(), TooLarge> {
        self.objects = self.objects.saturating_add(count);
        let limit = self.limits.max_objects;
        if self.objects > limit {
            return Err(too_large(
                path,
                format!("the source renders more than {limit} objects (the limit per source)"),
            ));
        }
        Ok(())
    }
}

/// A file or a render is bigger than [`Limits`] allow.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TooLarge {
    pub path: String,
    pub message: String,
}

fn too_large(path: &Path, message: String) -> TooLarge {
    TooLarge {
        path: path.display().to_string(),
        message,
    }
}

pub(crate) fn path_line(path: &Path, line: usize) -> PathBuf {
    if line == 0 {
        path.to_path_buf()
    } else {
        PathBuf::from(format!("{}:{line}", path.display()))
    }
}

/// `64 MiB`, `1 GiB`, `50.0 MiB`, `4096 bytes`.
pub fn size(bytes: usize) -> String {
    const GIB: usize = 1024 * MIB;
    match bytes {
        b if b >= GIB && b % GIB == 0 => format!("{} GiB", b / GIB),
        b if b >= MIB && b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b >= MIB => format!("{:.1} MiB", b as f64 / MIB as f64),
        b => format!("{b} bytes"),
    }
}

/// The size of `value` as compact JSON, and its number of nodes.
fn measure(value: &Value) -> (usize, usize) {
    match value {
        Value::Null => (4, 1),
        Value::Bool(_) => (5, 1),
        Value::Number(n) => (n.to_string().len(), 1),
        Value::String(s) => (s.len() + 2, 1),
        Value::Array(items) => items.iter().fold((2, 1), |(b, n), item| {
            let (ib, inodes) = measure(item);
            (b + ib + 1, n + inodes)
        }),
        Value::Object(map) => map.iter().fold((2, 1), |(b, n), (key, item)| {
            let (ib, inodes) = measure(item);
            (b + key.len() + 4 + ib, n + 1 + inodes)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(64 * MIB), "64 MiB");
        assert_eq!(size(1024 * MIB), "1 GiB");
        assert_eq!(size(50 * MIB + MIB / 2), "50.5 MiB");
        assert_eq!(size(4096), "4096 bytes");
    }

    #[test]
    fn a_document_is_charged_its_json_size_and_aliased_ones_their_nodes() {
        let mut budget = Budget::new(Limits {
            max_rendered_bytes: 30,
            max_alias_nodes: 6,
            ..Limits::default()
        });
        let value = serde_json::json!({"a": [1, "x"]});
        // An upper bound of the compact JSON (a comma too many per
        // collection), and every node, keys included.
        let (bytes, nodes) = measure(&value);
        assert!((13..=15).contains(&bytes), "{bytes}");
        assert_eq!(nodes, 5);
        budget
            .document(Path::new("a.yaml"), 1, &value, true)
            .unwrap();
        let error = budget
            .document(Path::new("a.yaml"), 3, &value, true)
            .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("a.yaml:3: YAML aliases expand to more than 6 nodes")
        );
        let error = budget
            .document(
                Path::new("b.json"),
                0,
                &serde_json::json!(["a long enough string"]),
                false,
            )
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "b.json: the rendered objects exceed the limit of 30 bytes per source"
        );
    }
}
