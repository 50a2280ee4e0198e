//! Template functions that read the world outside the chart: `lookup`
//! (live objects) and `getHostByName` (DNS). `helm template` has no cluster
//! and no network, so both quietly answer empty and the chart renders as if
//! the cluster held nothing: a Secret "generated once, then looked up"
//! would be regenerated on every sync. A chart that calls them is refused,
//! naming the file and line, rather than rendered wrong.

use super::RenderError;
use crate::files::{Entry, Files};

const FUNCTIONS: &[(&str, &str)] = &[
    ("lookup", "reads live objects from the cluster"),
    ("getHostByName", "resolves a host name over the network"),
];

/// Refuses the chart at `path` of `repository` if one of its own templates
/// calls one of [`FUNCTIONS`]. Subcharts (`charts/`) are left alone: library
/// charts such as Bitnami's `common` define helpers that call `lookup`
/// whether or not the chart uses them, and their authors, not the
/// application's, would have to act on the error.
pub(super) fn check(repository: &Files, path: &str) -> Result<(), RenderError> {
    let prefix = match path.trim_matches('/') {
        "" => String::new(),
        dir => format!("{dir}/"),
    };
    for (file, entry) in repository.entries.range(prefix.clone()..) {
        let Some(relative) = file.strip_prefix(&prefix) else {
            break;
        };
        let Entry::File(bytes) = entry else { continue };
        if !relative.starts_with("templates/") {
            continue;
        }
        let text = String::from_utf8_lossy(bytes);
        if let Some((line, function, what)) = first_call(&text) {
            return Err(RenderError::Failed {
                renderer: "helm".into(),
                message: format!(
                    "{file}:{line}: calls `{function}`, which {what}; `helm template` \
                     answers it with nothing, so the chart would render wrong — remove the \
                     call or pass the value in through values"
                ),
            });
        }
    }
    Ok(())
}

/// The 1-based line, name and description of the first call of one of
/// [`FUNCTIONS`] inside a `{{ … }}` action of `text` (comments skipped).
fn first_call(text: &str) -> Option<(usize, &'static str, &'static str)> {
    let mut rest = text;
    let mut offset = 0;
    while let Some(open) = rest.find("{{") {
        let action_start = open + 2;
        let close = rest[action_start..]
            .find("}}")
            .map_or(rest.len(), |c| action_start + c);
        let action = &rest[action_start..close];
        let trimmed = action.trim_start_matches(['-', ' ', '\t', '\n']);
        if !trimmed.starts_with("/*") {
            for (function, what) in FUNCTIONS {
                if let Some(at) = word(action, function) {
                    let line = 1 + text[..offset + action_start + at].matches('\n').count();
                    return Some((line, function, what));
                }
            }
        }
        let next = (close + 2).min(rest.len());
        offset += next;
        rest = &rest[next..];
    }
    None
}

/// Where `name` occurs in `action` as a whole identifier (not inside a
/// string or as part of `.Values.lookup`).
fn word(action: &str, name: &str) -> Option<usize> {
    let bytes = action.as_bytes();
    let mut in_string = None;
    for (index, &byte) in bytes.iter().enumerate() {
        match in_string {
            Some(quote) => {
                if byte == quote && bytes.get(index.wrapping_sub(1)) != Some(&b'\\') {
                    in_string = None;
                }
                continue;
            }
            None if byte == b'"' || byte == b'`' => {
                in_string = Some(byte);
                continue;
            }
            None => {}
        }
        if action[index..].starts_with(name) {
            let before = index.checked_sub(1).map(|i| bytes[i]);
            let after = bytes.get(index + name.len()).copied();
            let boundary = |b: Option<u8>| {
                b.is_none_or(|b| {
                    !(b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'$')
                })
            };
            if boundary(before) && boundary(after) {
                return Some(index);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_in_actions_are_found_with_their_line() {
        let text = "kind: Secret\ndata:\n  {{- $s := (lookup \"v1\" \"Secret\" .Release.Namespace \"x\") }}\n";
        assert_eq!(first_call(text).map(|c| (c.0, c.1)), Some((3, "lookup")));
        let text = "a: {{ getHostByName \"example.com\" | quote }}\n";
        assert_eq!(first_call(text).map(|c| c.1), Some("getHostByName"));
    }

    #[test]
    fn the_word_outside_a_call_is_not_a_call() {
        for text in [
            "lookup: {{ .Values.lookup }}\n",
            "a: {{ \"lookup\" }}\n",
            "{{/* lookup is not used here */}}\n",
            "a: {{ $lookupTable }}\n",
            "# lookup\n",
        ] {
            assert_eq!(first_call(text), None, "{text}");
        }
    }
}
