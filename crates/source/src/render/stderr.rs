//! A renderer's standard error, read as the one-line message of a failed
//! render. `kustomize build`, `kubectl kustomize` and `helm` print the same
//! error in different frames; the message keeps the error and drops the
//! frame, so it reads the same whichever renderer ran and does not change
//! from one failed render to the next.

/// `errors` as one line: its non-blank lines joined with `; `, without
///
/// - kubectl's log prefix (`E1205 07:57:42.622746  2 run.go:72] `), whose
///   time would make every failed render a new message;
/// - kubectl's structured frame around the error (`"command failed"
///   err="…"` or `err=<` … `>`);
/// - cobra's `Error: ` before it (helm, kustomize);
/// - helm's advice to rerun with `--debug` (there is no command line to
///   rerun).
pub(super) fn one_line(errors: &str) -> String {
    unframed(errors)
        .iter()
        .map(|line| line.trim())
        .map(|line| line.strip_prefix("Error: ").unwrap_or(line))
        .filter(|line| !line.is_empty() && !line.starts_with("Use --debug flag"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The lines of `errors` with kubectl's log frames taken off.
fn unframed(errors: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = errors.lines();
    while let Some(line) = lines.next() {
        let line = without_log_prefix(line.trim());
        match logged_error(line) {
            Some(LoggedError::Quoted(text)) => out.extend(text.lines().map(String::from)),
            Some(LoggedError::Block) => {
                for inner in lines.by_ref() {
                    if inner.trim() == ">" {
                        break;
                    }
                    out.push(inner.strip_prefix('\t').unwrap_or(inner).to_string());
                }
            }
            None => out.push(line.to_string()),
        }
    }
    out
}

/// `line` without a klog header: a severity letter, `MMDD hh:mm:ss.micros`,
/// a thread id and `file:line] `.
fn without_log_prefix(line: &str) -> &str {
    let mut words = line.splitn(4, ' ').filter(|w| !w.is_empty());
    let is_header = |(first, time): (&str, &str)| {
        first.len() == 5
            && first.starts_with(['I', 'W', 'E', 'F'])
            && first[1..].bytes().all(|b| b.is_ascii_digit())
            && time.len() > 8
            && time.as_bytes()[2] == b':'
    };
    match (words.next(), words.next()) {
        (Some(first), Some(time)) if is_header((first, time)) => line
            .split_once("] ")
            .map_or(line, |(_, rest)| rest.trim_start()),
        _ => line,
    }
}

/// The error of a structured klog record (`"message" err=…`).
enum LoggedError {
    /// `err="…"`: the error, unquoted.
    Quoted(String),
    /// `err=<`: the error is on the lines that follow, each indented by a
    /// tab, up to a line `>`.
    Block,
}

fn logged_error(line: &str) -> Option<LoggedError> {
    if !line.starts_with('"') {
        return None;
    }
    let (_, value) = line.split_once("\" err=")?;
    if value == "<" {
        return Some(LoggedError::Block);
    }
    unquote(value).map(LoggedError::Quoted)
}

/// A Go-quoted string's text: `"a \"b\"\n"` is `a "b"` and a newline.
fn unquote(quoted: &str) -> Option<String> {
    let inner = quoted.strip_prefix('"')?.strip_suffix('"')?;
    let mut text = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            text.push(c);
            continue;
        }
        match chars.next()? {
            'n' => text.push('\n'),
            't' => text.push('\t'),
            other => text.push(other),
        }
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helms_error_loses_its_cobra_prefix_and_its_debug_advice() {
        let helm = "Error: execution error at (web/templates/cm.yaml:1:3): required\n\n\
                    Use --debug flag to render out invalid YAML\n";
        assert_eq!(
            one_line(helm),
            "execution error at (web/templates/cm.yaml:1:3): required"
        );
        assert_eq!(one_line("a\n  b\n"), "a; b");
    }

    #[test]
    fn kubectl_and_kustomize_print_the_same_error_as_the_same_line() {
        let kustomize = "Error: invalid Kustomization: json: unknown field \"frobnicate\"\n";
        let kubectl = "E1205 07:57:42.787296       2 run.go:72] \"command failed\" \
                       err=\"invalid Kustomization: json: unknown field \\\"frobnicate\\\"\"\n";
        let expected = "invalid Kustomization: json: unknown field \"frobnicate\"";
        assert_eq!(one_line(kustomize), expected);
        assert_eq!(one_line(kubectl), expected);
    }

    #[test]
    fn a_multi_line_error_in_a_kubectl_log_block_is_unwrapped() {
        let kubectl = "E1207 10:57:13.179904    5334 run.go:72] \"command failed\" err=<\n\
                       \ttrouble configuring with config: `\n\
                       \tname: nginx\n\
                       \t`: must specify --enable-helm\n >\n";
        let kustomize = "Error: trouble configuring with config: `\nname: nginx\n\
                         `: must specify --enable-helm\n";
        let expected =
            "trouble configuring with config: `; name: nginx; `: must specify --enable-helm";
        assert_eq!(one_line(kubectl), expected);
        assert_eq!(one_line(kustomize), expected);
    }

    #[test]
    fn a_line_that_only_looks_like_a_log_record_is_kept() {
        assert_eq!(
            one_line("\"quoted\" err=unterminated"),
            "\"quoted\" err=unterminated"
        );
        assert_eq!(one_line("E12 not a header] x"), "E12 not a header] x");
    }
}
