//! Writing values as YAML text that kubectl reads back as the same value.
//!
//! kubectl reads YAML 1.1-style (see `manifest.rs`): `yes`, `on`, `y` are
//! booleans, `0755` is octal and `1:30` is a sexagesimal number. A string
//! that any YAML reader could take for something else is double-quoted.

use saphyr_parser::ScalarStyle;
use serde_json::Value;

/// How a file spells its values: YAML, or JSON (which is also YAML).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Yaml,
    Json,
}

/// A scalar or collection in flow style, on one line.
pub fn flow(value: &Value, flavor: Flavor) -> String {
    match value {
        Value::String(text) => match flavor {
            Flavor::Yaml => string(text),
            Flavor::Json => serde_json::to_string(text).expect("a string serializes"),
        },
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .map(|(key, value)| {
                    let key = flow(&Value::String(key.clone()), flavor);
                    format!("{key}: {}", flow(value, flavor))
                })
                .collect();
            format!("{{{}}}", entries.join(", "))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(|item| flow(item, flavor)).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// A scalar replacing one written in `style`: quoted strings keep their
/// quotes; anything else is written plain when that reads back the same.
pub fn replacing(value: &Value, style: ScalarStyle, flavor: Flavor) -> String {
    match (value, style, flavor) {
        (Value::String(text), ScalarStyle::SingleQuoted, Flavor::Yaml) if !text.contains('\n') => {
            format!("'{}'", text.replace('\'', "''"))
        }
        (Value::String(text), ScalarStyle::DoubleQuoted, _) => {
            serde_json::to_string(text).expect("a string serializes")
        }
        (value, _, flavor) => flow(value, flavor),
    }
}

/// A string, plain when that is safe, else double-quoted.
pub fn string(text: &str) -> String {
    if is_safe_plain(text) {
        text.to_string()
    } else {
        serde_json::to_string(text).expect("a string serializes")
    }
}

/// Whether `text` written plain reads back as this very string in YAML
/// 1.1 and 1.2, in block and flow context alike.
fn is_safe_plain(text: &str) -> bool {
    const WORDS: &[&str] = &[
        "y", "yes", "n", "no", "true", "false", "on", "off", "null", "~", ".inf", "-.inf", "+.inf",
        ".nan",
    ];
    let Some(first) = text.chars().next() else {
        return false;
    };
    let looks_numeric = (first.is_ascii_digit() || "+-.".contains(first))
        && text
            .chars()
            .all(|c| c.is_ascii_hexdigit() || "xXoO._:+-".contains(c));
    let allowed = text
        .chars()
        .all(|c| c.is_alphanumeric() || "-_./:@+=%~^$".contains(c));
    allowed
        && !looks_numeric
        && !WORDS.contains(&text.to_ascii_lowercase().as_str())
        && (first.is_alphanumeric() || first == '/' || first == '.' || first == '_')
        && !text.ends_with(':')
}

/// `value` as block-style lines at `indent` spaces, as the value of a
/// mapping key (`key:` then these lines). Scalars and empty collections
/// are not block values: callers write those with [`flow`].
pub fn block(value: &Value, indent: usize) -> Vec<String> {
    let pad = " ".repeat(indent);
    let mut lines = Vec::new();
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                let key = string(key);
                if is_inline(value) {
                    lines.push(format!("{pad}{key}: {}", flow(value, Flavor::Yaml)));
                } else {
                    lines.push(format!("{pad}{key}:"));
                    lines.extend(block(value, indent + 2));
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                if is_inline(item) {
                    lines.push(format!("{pad}- {}", flow(item, Flavor::Yaml)));
                } else {
                    let inner = block(item, indent + 2);
                    for (n, line) in inner.into_iter().enumerate() {
                        if n == 0 {
                            lines.push(format!("{pad}- {}", &line[indent + 2..]));
                        } else {
                            lines.push(line);
                        }
                    }
                }
            }
        }
        scalar => lines.push(format!("{pad}{}", flow(scalar, Flavor::Yaml))),
    }
    lines
}

/// Whether a value is written on its key's line.
pub fn is_inline(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_that_would_read_as_something_else_are_quoted() {
        for text in [
            "yes",
            "No",
            "on",
            "OFF",
            "y",
            "true",
            "null",
            "~",
            "",
            "1.10",
            "0755",
            "1e3",
            "0x1f",
            "12:30",
            ".5",
            "-1",
            "+1",
            " lead",
            "a: b",
            "a #b",
            "#x",
            "*x",
            "&x",
            "!x",
            "[x]",
            "{x}",
            "a,b",
            "x:",
            "-x",
            ".inf",
            "multi\nline",
            "'q'",
            "\"q\"",
        ] {
            let written = string(text);
            assert!(written.starts_with('"'), "{text:?} written as {written}");
            let read: Value = serde_json::from_str(&written).unwrap();
            assert_eq!(read, json!(text));
        }
    }

    #[test]
    fn ordinary_strings_stay_plain() {
        for text in [
            "nginx:1.27",
            "web",
            "ghcr.io/org/app@sha256:abc",
            "a-b_c",
            "v1.2.3",
            "/data",
        ] {
            assert_eq!(string(text), text);
        }
    }

    #[test]
    fn quoted_scalars_keep_their_quotes() {
        assert_eq!(
            replacing(&json!("it's"), ScalarStyle::SingleQuoted, Flavor::Yaml),
            "'it''s'"
        );
        assert_eq!(
            replacing(&json!("x"), ScalarStyle::DoubleQuoted, Flavor::Yaml),
            "\"x\""
        );
        assert_eq!(replacing(&json!(3), ScalarStyle::Plain, Flavor::Yaml), "3");
        assert_eq!(
            replacing(&json!("3"), ScalarStyle::Plain, Flavor::Yaml),
            "\"3\""
        );
    }

    #[test]
    fn nested_values_are_written_in_block_style() {
        let value = json!({"limits": {"cpu": "1"}, "args": ["a", {"k": "v", "w": 1}], "e": {}});
        assert_eq!(
            block(&value, 2).join("\n"),
            "  args:\n    - a\n    - k: v\n      w: 1\n  e: {}\n  limits:\n    cpu: \"1\""
        );
    }
}
