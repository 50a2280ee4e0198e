//! Reading the head of an HTTP response a test received as text.

/// The value of header `name` (in any case) in `head`, trimmed.
pub fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name)
            .then(|| value.trim().to_string())
    })
}
