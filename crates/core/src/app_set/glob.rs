//! Path globs for the Git directory generator: `*` and `?` within one
//! path segment, `[abc]` classes, and `**` for any number of segments.
//!
//! Patterns come from ApplicationSets and paths from repositories, so both
//! the segments and each segment's characters are matched by
//! [`crate::wildcard`], in time polynomial in the pattern and the path.

use crate::wildcard::{self, Token};

/// Whether `path` (`/`-separated, no leading `/`) matches `pattern`.
pub fn matches(pattern: &str, path: &str) -> bool {
    let pattern: Vec<Segment> = split(pattern).into_iter().map(Segment::of).collect();
    wildcard::matches(&pattern, &split(path))
}

fn split(text: &str) -> Vec<&str> {
    text.split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect()
}

/// One `/`-separated part of a pattern.
enum Segment {
    /// `**`: any number of segments.
    AnyDepth,
    Glob(Vec<Piece>),
}

impl Segment {
    fn of(pattern: &str) -> Self {
        match pattern {
            "**" => Segment::AnyDepth,
            _ => Segment::Glob(pieces(pattern)),
        }
    }
}

impl Token<&str> for Segment {
    fn repeats(&self) -> bool {
        matches!(self, Segment::AnyDepth)
    }

    fn fits(&self, segment: &&str) -> bool {
        match self {
            Segment::AnyDepth => true,
            Segment::Glob(pieces) => {
                wildcard::matches(pieces, &segment.chars().collect::<Vec<char>>())
            }
        }
    }
}

/// One item of a segment's pattern.
enum Piece {
    Star,
    One,
    Class { negated: bool, class: Vec<char> },
    Literal(char),
}

impl Token<char> for Piece {
    fn repeats(&self) -> bool {
        matches!(self, Piece::Star)
    }

    fn fits(&self, c: &char) -> bool {
        match self {
            Piece::Star | Piece::One => true,
            Piece::Class { negated, class } => in_class(class, *c) != *negated,
            Piece::Literal(literal) => c == literal,
        }
    }
}

fn pieces(pattern: &str) -> Vec<Piece> {
    let pattern: Vec<char> = pattern.chars().collect();
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < pattern.len() {
        let close = || pattern[i + 1..].iter().position(|c| *c == ']');
        pieces.push(
            match (pattern[i], if pattern[i] == '[' { close() } else { None }) {
                ('*', _) => Piece::Star,
                ('?', _) => Piece::One,
                ('[', Some(close)) => {
                    let class = &pattern[i + 1..i + 1 + close];
                    i += close + 1;
                    match class.split_first() {
                        Some(('!' | '^', class)) => Piece::Class {
                            negated: true,
                            class: class.to_vec(),
                        },
                        _ => Piece::Class {
                            negated: false,
                            class: class.to_vec(),
                        },
                    }
                }
                // An unclosed `[` is itself.
                (literal, _) => Piece::Literal(literal),
            },
        );
        i += 1;
    }
    pieces
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
