//! Path globs for the Git directory generator: `*` and `?` within one
//! path segment, `[abc]` classes, and `**` for any number of segments.
//!
//! Patterns come from ApplicationSets and paths from repositories, so each
//! match fills a table over (pattern position, text position) instead of
//! backtracking: `*a*a*a*a*b` or `**/**/**/x` cost the pattern's size times
//! the path's, never an exponential.

/// Whether `path` (`/`-separated, no leading `/`) matches `pattern`.
pub fn matches(pattern: &str, path: &str) -> bool {
    let pattern: Vec<&str> = split(pattern);
    let path: Vec<&str> = split(path);
    let (n, width) = (path.len(), path.len() + 1);
    // from[i * width + j]: pattern segments i.. match path segments j..
    let mut from = vec![false; (pattern.len() + 1) * width];
    from[pattern.len() * width + n] = true;
    for i in (0..pattern.len()).rev() {
        for j in (0..=n).rev() {
            from[i * width + j] = if pattern[i] == "**" {
                from[(i + 1) * width + j] || (j < n && from[i * width + j + 1])
            } else {
                j < n && segment_matches(pattern[i], path[j]) && from[(i + 1) * width + j + 1]
            };
        }
    }
    from[0]
}

fn split(text: &str) -> Vec<&str> {
    text.split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect()
}

/// One item of a segment's pattern.
enum Token {
    Star,
    One,
    Class { negated: bool, class: Vec<char> },
    Literal(char),
}

fn tokens(pattern: &str) -> Vec<Token> {
    let pattern: Vec<char> = pattern.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < pattern.len() {
        let close = || pattern[i + 1..].iter().position(|c| *c == ']');
        tokens.push(
            match (pattern[i], if pattern[i] == '[' { close() } else { None }) {
                ('*', _) => Token::Star,
                ('?', _) => Token::One,
                ('[', Some(close)) => {
                    let class = &pattern[i + 1..i + 1 + close];
                    i += close + 1;
                    match class.split_first() {
                        Some(('!' | '^', class)) => Token::Class {
                            negated: true,
                            class: class.to_vec(),
                        },
                        _ => Token::Class {
                            negated: false,
                            class: class.to_vec(),
                        },
                    }
                }
                // An unclosed `[` is itself.
                (literal, _) => Token::Literal(literal),
            },
        );
        i += 1;
    }
    tokens
}

fn segment_matches(pattern: &str, text: &str) -> bool {
    let tokens = tokens(pattern);
    let text: Vec<char> = text.chars().collect();
    let (n, width) = (text.len(), text.len() + 1);
    // from[i * width + j]: tokens i.. match characters j..
    let mut from = vec![false; (tokens.len() + 1) * width];
    from[tokens.len() * width + n] = true;
    for (i, token) in tokens.iter().enumerate().rev() {
        for j in (0..=n).rev() {
            let one = |fits: bool| j < n && fits && from[(i + 1) * width + j + 1];
            from[i * width + j] = match token {
                Token::Star => from[(i + 1) * width + j] || (j < n && from[i * width + j + 1]),
                Token::One => one(true),
                Token::Class { negated, class } => {
                    one(j < n && in_class(class, text[j]) != *negated)
                }
                Token::Literal(literal) => one(j < n && text[j] == *literal),
            };
        }
    }
    from[0]
}

fn in_class(class: &[char], c: char) -> bool {
    let mut i = 0;
    while i < class.len() {
        if i + 2 < class.len() && class[i + 1] == '-' {
            if (class[i]..=class[i + 2]).contains(&c) {
                return true;
            }
            i += 3;
        } else {
            if class[i] == c {
                return true;
            }
            i += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn a_star_matches_within_one_segment_only() {
        assert!(matches("apps/*", "apps/shop"));
        assert!(!matches("apps/*", "apps/shop/base"));
        assert!(!matches("apps/*", "apps"));
        assert!(matches("apps/s*p", "apps/shop"));
    }

    #[test]
    fn a_double_star_matches_any_depth() {
        assert!(matches("apps/**/overlays", "apps/shop/overlays"));
        assert!(matches("apps/**/overlays", "apps/overlays"));
        assert!(matches("**", "a/b/c"));
    }

    #[test]
    fn classes_and_question_marks_match_one_character() {
        assert!(matches("team-[a-c]/app?", "team-b/app1"));
        assert!(!matches("team-[!a-c]/app?", "team-b/app1"));
        assert!(!matches("app?", "app"));
        assert!(matches("[a", "[a"));
    }

    #[test]
    fn a_hostile_pattern_is_answered_at_once_rather_than_by_exponential_backtracking() {
        let star_a = format!("{}b", "*a".repeat(40));
        let long = "a".repeat(200);
        let started = std::time::Instant::now();
        assert!(!matches(&star_a, &long));
        let deep = format!("{}x", "**/".repeat(40));
        let path = vec!["a"; 60].join("/");
        assert!(!matches(&deep, &path));
        assert!(matches(&deep, &format!("{path}/x")));
        // Backtracking took longer than the age of the universe here.
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
