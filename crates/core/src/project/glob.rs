//! The patterns a Project's lists are written in: `*` matches any run of
//! characters without a `/`, `**` any run at all; every other character
//! matches itself. So `https://git.example/team-a/*` admits the
//! repositories directly under `team-a/` and `team-a-*` the namespaces
//! that start with `team-a-`. The admission policy compiles the same
//! patterns to RE2 (see `crate::project` tests and the policy's CEL).

/// Whether `text` matches `pattern`.
///
/// ```
/// use tether_core::project::glob::matches;
/// assert!(matches("https://git.example/team-a/*", "https://git.example/team-a/shop"));
/// assert!(!matches("https://git.example/team-a/*", "https://git.example/team-a/x/shop"));
/// assert!(matches("https://git.example/**", "https://git.example/team-a/x/shop"));
/// assert!(matches("team-a-*", "team-a-dev"));
/// assert!(!matches("team-a", "team-ab"));
/// ```
pub fn matches(pattern: &str, text: &str) -> bool {
    let tokens = tokens(pattern);
    matches_from(&tokens, text.as_bytes())
}

/// Whether `text` matches any of `patterns`.
pub fn any(patterns: &[String], text: &str) -> bool {
    patterns.iter().any(|pattern| matches(pattern, text))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Byte(u8),
    /// `*`: any run without `/`.
    Segment,
    /// `**`: any run.
    Any,
}

fn tokens(pattern: &str) -> Vec<Token> {
    let bytes = pattern.as_bytes();
    let mut tokens = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'*', Some(b'*')) => {
                tokens.push(Token::Any);
                i += 2;
                // `***` is `**` then `*`: the same language as `**`.
                while bytes.get(i) == Some(&b'*') {
                    i += 1;
                }
            }
            (b'*', _) => {
                tokens.push(Token::Segment);
                i += 1;
            }
            (byte, _) => {
                tokens.push(Token::Byte(byte));
                i += 1;
            }
        }
    }
    tokens
}

/// Backtracking match, memoized on (token, position) so a hostile pattern
/// of many stars stays polynomial.
fn matches_from(tokens: &[Token], text: &[u8]) -> bool {
    let mut seen = vec![false; (tokens.len() + 1) * (text.len() + 1)];
    let mut stack = vec![(0usize, 0usize)];
    while let Some((t, p)) = stack.pop() {
        let index = t * (text.len() + 1) + p;
        if std::mem::replace(&mut seen[index], true) {
            continue;
        }
        match tokens.get(t) {
            None if p == text.len() => return true,
            None => {}
            Some(Token::Byte(byte)) if text.get(p) == Some(byte) => stack.push((t + 1, p + 1)),
            Some(Token::Byte(_)) => {}
            Some(Token::Segment) => {
                stack.push((t + 1, p));
                if p < text.len() && text[p] != b'/' {
                    stack.push((t, p + 1));
                }
            }
            Some(Token::Any) => {
                stack.push((t + 1, p));
                if p < text.len() {
                    stack.push((t, p + 1));
                }
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn a_pattern_without_stars_matches_only_itself() {
        assert!(matches("team-a", "team-a"));
        assert!(!matches("team-a", "team-a-dev"));
        assert!(!matches("team-a", "xteam-a"));
        assert!(matches("", ""));
    }

    #[test]
    fn a_star_stays_within_a_path_segment_and_two_cross_them() {
        assert!(matches("https://h/org/*", "https://h/org/app.git"));
        assert!(matches("https://h/org/*", "https://h/org/"));
        assert!(!matches("https://h/org/*", "https://h/org/a/b"));
        assert!(matches("https://h/org/**", "https://h/org/a/b"));
        assert!(matches("*", "anything-without-slash"));
        assert!(matches("**", "any/thing"));
        assert!(!matches("*", "a/b"));
    }

    #[test]
    fn a_host_pattern_cannot_be_escaped_with_user_info_or_a_longer_host() {
        assert!(!matches(
            "https://git.example/*",
            "https://git.example.evil/x"
        ));
        assert!(!matches(
            "https://git.example/*",
            "https://git.example@evil/x"
        ));
    }

    #[test]
    fn many_stars_against_a_long_text_stay_fast() {
        let pattern = "*a".repeat(40);
        let text = "a".repeat(2000) + "b";
        assert!(!matches(&pattern, &text));
    }
}
