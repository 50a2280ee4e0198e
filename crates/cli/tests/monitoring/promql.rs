//! The metric names a PromQL expression reads, found without a full
//! parser: label names (inside `{…}`, `by (…)`, `without (…)`, `on (…)`,
//! `ignoring (…)`, `group_left (…)`, `group_right (…)`), function and
//! aggregation names (an identifier followed by `(`), keywords, strings,
//! numbers, durations, ranges and Grafana variables (`$app`, `${app}`) are
//! skipped; every other identifier is a metric name.

use std::collections::BTreeSet;

/// Keywords followed by a parenthesised list of label names.
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Keywords that stand alone (matched case-insensitively, as PromQL does).
const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
];

pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i = match c {
            '#' => skip_while(&chars, i, |c| c != '\n'),
            '"' | '\'' | '`' => skip_string(&chars, i),
            '{' => skip_group(&chars, i, '{', '}'),
            '[' => skip_group(&chars, i, '[', ']'),
            '$' if chars.get(i + 1) == Some(&'{') => skip_group(&chars, i + 1, '{', '}'),
            '$' => skip_while(&chars, i + 1, is_identifier),
            _ if c.is_ascii_digit() || (c == '.' && next_is_digit(&chars, i)) => {
                skip_while(&chars, i, |c| {
                    c.is_ascii_alphanumeric() || c == '_' || c == '.'
                })
            }
            _ if is_identifier_start(c) => {
                let end = skip_while(&chars, i, is_identifier);
                let word: String = chars[i..end].iter().collect();
                let lower = word.to_ascii_lowercase();
                let next = skip_while(&chars, end, char::is_whitespace);
                let opens = chars.get(next) == Some(&'(');
                if GROUPING.contains(&lower.as_str()) {
                    if opens {
                        skip_group(&chars, next, '(', ')')
                    } else {
                        end
                    }
                } else {
                    // `sum by (le) (…)`: an aggregation, its modifier first.
                    let modified = ["by", "without"].iter().any(|modifier| {
                        let after = next + modifier.len();
                        chars.len() >= after
                            && chars[next..after]
                                .iter()
                                .collect::<String>()
                                .eq_ignore_ascii_case(modifier)
                            && !chars.get(after).is_some_and(|&c| is_identifier(c))
                    });
                    if !opens && !modified && !KEYWORDS.contains(&lower.as_str()) {
                        names.insert(word);
                    }
                    end
                }
            }
            _ => i + 1,
        };
    }
    names
}

fn is_identifier_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_identifier(c: char) -> bool {
    is_identifier_start(c) || c.is_ascii_digit()
}

fn next_is_digit(chars: &[char], i: usize) -> bool {
    chars.get(i + 1).is_some_and(char::is_ascii_digit)
}

fn skip_while(chars: &[char], mut i: usize, keep: impl Fn(char) -> bool) -> usize {
    while i < chars.len() && keep(chars[i]) {
        i += 1;
    }
    i
}

/// Past the string opening at `i`; backquoted strings have no escapes.
fn skip_string(chars: &[char], mut i: usize) -> usize {
    let quote = chars[i];
    i += 1;
    while i < chars.len() && chars[i] != quote {
        i += if chars[i] == '\\' && quote != '`' {
            2
        } else {
            1
        };
    }
    i + 1
}

/// Past the group opening at `i`, strings inside included.
fn skip_group(chars: &[char], mut i: usize, open: char, close: char) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => {
                i = skip_string(chars, i);
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

#[test]
fn promql_metric_names_skip_labels_functions_keywords_strings_and_durations() {
    let cases: &[(&str, &[&str])] = &[
        (
            "sum by (namespace, name) (increase(tether_app_self_heal_total[15m])) > 5",
            &["tether_app_self_heal_total"],
        ),
        (
            r#"histogram_quantile(0.99, sum by (le) (rate(sync_seconds_bucket{job="a", le!="+Inf"}[$__rate_interval])))"#,
            &["sync_seconds_bucket"],
        ),
        (
            "seconds\n  and on (namespace, name)\nmax by (namespace, name) (too_long) == 1",
            &["seconds", "too_long"],
        ),
        (r#"absent(up{job="tether"} == 1)"#, &["up"]),
        (
            r#"count(info{state="Converged", name=~"$app"} == 1) or vector(0)"#,
            &["info"],
        ),
        (
            r#"label_replace(info, "dst", "$1 by on", "src", '(.*)') unless bool_metric"#,
            &["bool_metric", "info"],
        ),
        ("requests offset 5m / requests @ start()", &["requests"]),
        ("max_over_time(rate(requests[5m:30s])[1h:])", &["requests"]),
        (
            "1e-3 * .5 * 0x1F * Inf + NaN + 2h30m * requests",
            &["requests"],
        ),
        ("sum without (instance) (leader) > bool 1", &["leader"]),
        (
            "count without(instance)(leader) + by_app + bystander",
            &["by_app", "bystander", "leader"],
        ),
        (
            "errors / ignoring(code) group_left(verb, resource) requests",
            &["errors", "requests"],
        ),
        (
            "errors / on(code) group_left requests",
            &["errors", "requests"],
        ),
        ("# a comment naming not_a_metric\nrequests", &["requests"]),
        (
            r#"requests{path="a\"b} c", other=`x{y`} * sum by(le)(x)"#,
            &["requests", "x"],
        ),
        ("sum(rate(requests[${interval}])) by (verb)", &["requests"]),
        (
            "topk(10, sum by (namespace) (a:recorded:rate5m))",
            &["a:recorded:rate5m"],
        ),
        ("a atan2 b", &["a", "b"]),
    ];
    for (expr, expected) in cases {
        let expected: BTreeSet<String> = expected.iter().map(|s| s.to_string()).collect();
        assert_eq!(metric_names(expr), expected, "{expr}");
    }
}
