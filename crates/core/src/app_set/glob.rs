//! Path globs for the Git directory generator: `*` and `?` within one
//! path segment, `[abc]` classes, and `**` for any number of segments.

/// Whether `path` (`/`-separated, no leading `/`) matches `pattern`.
pub fn matches(pattern: &str, path: &str) -> bool {
    let pattern: Vec<&str> = split(pattern);
    let path: Vec<&str> = split(path);
    segments(&pattern, &path)
}

fn split(text: &str) -> Vec<&str> {
    text.split('/')
        .filter(|s| !s.is_empty() && *s != ".")
        .collect()
}

fn segments(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|skip| segments(rest, &path[skip..])),
        Some((first, rest)) => match path.split_first() {
            Some((segment, tail)) => segment_matches(first, segment) && segments(rest, tail),
            None => false,
        },
    }
}

fn segment_matches(pattern: &str, text: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let text: Vec<char> = text.chars().collect();
    chars(&pattern, &text)
}

fn chars(pattern: &[char], text: &[char]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some(('*', rest)) => (0..=text.len()).any(|skip| chars(rest, &text[skip..])),
        Some(('?', rest)) => !text.is_empty() && chars(rest, &text[1..]),
        Some(('[', rest)) => {
            let Some(close) = rest.iter().position(|c| *c == ']') else {
                return text.first() == Some(&'[') && chars(rest, &text[1..]);
            };
            let (class, after) = (&rest[..close], &rest[close + 1..]);
            let (negated, class) = match class.split_first() {
                Some(('!' | '^', class)) => (true, class),
                _ => (false, class),
            };
            match text.split_first() {
                Some((c, tail)) => in_class(class, *c) != negated && chars(after, tail),
                None => false,
            }
        }
        Some((literal, rest)) => text.first() == Some(literal) && chars(rest, &text[1..]),
    }
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
    }
}
