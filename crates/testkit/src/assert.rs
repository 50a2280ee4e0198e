//! Assertions on text that show the whole text when they fail.

/// Asserts that `text` begins with `prefix`.
#[track_caller]
pub fn assert_starts_with(text: &str, prefix: &str) {
    assert!(text.starts_with(prefix), "{text}");
}

/// Asserts that `text` contains `part`.
#[track_caller]
pub fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "no {part:?} in:\n{text}");
}
