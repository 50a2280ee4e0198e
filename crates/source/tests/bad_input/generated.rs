//! Cases that cannot be stored as YAML text: bytes that are not UTF-8, and
//! NUL bytes. The huge ones (a 50 MB file, 100k objects, an alias bomb) are
//! in `huge.rs`, where their time and memory are measured.

use std::collections::BTreeMap;

use crate::corpus::{Case, Input};

pub fn cases() -> Vec<Case> {
    let cm = |name: &[u8]| {
        [
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ".as_slice(),
            name,
            b"\n",
        ]
        .concat()
    };
    let utf16: Vec<u8> = [0xFF, 0xFE]
        .into_iter()
        .chain("apiVersion: v1\n".encode_utf16().flat_map(u16::to_le_bytes))
        .collect();
    vec![
        plain(
            "latin-1-name",
            "cm.yaml",
            cm(b"caf\xe9"),
            "cm.yaml:4: not valid UTF-8",
        ),
        plain(
            "overlong-slash",
            "cm.yaml",
            cm(b"a\xc0\xafb"),
            "cm.yaml:4: not valid UTF-8",
        ),
        plain(
            "lone-continuation-byte",
            "cm.yaml",
            cm(b"\x80web"),
            "cm.yaml:4: not valid UTF-8",
        ),
        plain(
            "truncated-sequence",
            "cm.yaml",
            cm(b"web\xe2\x82"),
            "cm.yaml:4: not valid UTF-8",
        ),
        plain(
            "utf-16-file",
            "cm.yaml",
            utf16,
            "cm.yaml:1: not valid UTF-8",
        ),
        plain(
            "json-latin-1",
            "cm.json",
            b"{\"apiVersion\": \"v1\",\n\"kind\": \"caf\xe9\"}".to_vec(),
            "cm.json:2: not valid UTF-8",
        ),
        plain(
            "nul-byte-in-name",
            "cm.yaml",
            cm(b"we\0b"),
            "cm.yaml:4: unexpected character",
        ),
        plain(
            "nul-byte-in-key",
            "cm.yaml",
            b"apiVersion: v1\nki\0nd: ConfigMap\n".to_vec(),
            "cm.yaml:",
        ),
    ]
}

fn plain(name: &str, file: &str, bytes: Vec<u8>, expect: &str) -> Case {
    Case {
        name: format!("generated/{name}"),
        expect: vec![expect.to_string()],
        input: Input::Render {
            files: BTreeMap::from([(file.to_string(), bytes)]),
            symlinks: BTreeMap::new(),
            renderer: serde_json::json!({"directory": {}}),
            path: String::new(),
        },
    }
}
