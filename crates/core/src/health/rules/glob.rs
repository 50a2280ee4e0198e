//! `*` globs for rule groups and kinds.

/// Whether `text` matches `pattern`, where `*` matches any run of
/// characters (including none) and everything else matches itself.
pub(super) fn matches(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(index) => rest = &rest[index + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn a_star_matches_any_run_of_characters() {
        assert!(matches("*.crossplane.io", "pkg.crossplane.io"));
        assert!(matches("*", "Anything"));
        assert!(matches("Certificate", "Certificate"));
        assert!(matches("a*b*c", "axxbyyc"));
        assert!(!matches("*.crossplane.io", "crossplane.io"));
        assert!(!matches("Certificate", "CertificateRequest"));
        assert!(!matches("a*b*c", "axxcyyb"));
    }
}
