//! The patterns a Project's lists are written in: `*` matches any run of
//! characters without a `/`, `**` any run at all; every other character
//! matches itself. So `https://git.example/team-a/*` admits the
//! repositories directly under `team-a/` and `team-a-*` the namespaces
//! that start with `team-a-`. The admission policy compiles the same
//! patterns to RE2 (see `crate::project` tests and the policy's CEL).

use crate::wildcard::{self, Token};

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
    wildcard::matches(&pieces(pattern), text.as_bytes())
}

/// Whether `text` matches any of `patterns`.
pub fn any(patterns: &[String], text: &str) -> bool {
    patterns.iter().any(|pattern| matches(pattern, text))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    Byte(u8),
    /// `*`: any run without `/`.
    Segment,
    /// `**`: any run.
    Any,
}

impl Token<u8> for Piece {
    fn repeats(&self) -> bool {
        matches!(self, Piece::Segment | Piece::Any)
    }

    fn fits(&self, byte: &u8) -> bool {
        match self {
            Piece::Byte(own) => byte == own,
            Piece::Segment => *byte != b'/',
            Piece::Any => true,
        }
    }
}

fn pieces(pattern: &str) -> Vec<Piece> {
    let bytes = pattern.as_bytes();
    let mut pieces = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1)) {
            (b'*', Some(b'*')) => {
                pieces.push(Piece::Any);
                i += 2;
                // `***` is `**` then `*`: the same language as `**`.
                while bytes.get(i) == Some(&b'*') {
                    i += 1;
                }
            }
            (b'*', _) => {
                pieces.push(Piece::Segment);
                i += 1;
            }
            (byte, _) => {
                pieces.push(Piece::Byte(byte));
                i += 1;
            }
        }
    }
    pieces
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
