//! Which chart version a source asks for, and the highest one that fits.
//!
//! Helm's constraints (Masterminds semver) read like Cargo's with a few
//! differences this module smooths over: a plain `1.2.3` means exactly
//! that version (not `^1.2.3`), `1.2` and `1.2.x` mean any `1.2.*`, terms
//! are joined by spaces or commas, and `||` separates alternatives. A
//! leading `v` is allowed on versions. Pre-releases are chosen only when
//! the constraint names one, as in both.
//!
//! ```
//! use tether_source::chart::version::Constraint;
//! let wanted = Constraint::parse("1.2.x").unwrap();
//! let best = wanted.highest(["1.2.3", "1.2.4", "1.3.0", "junk"]).unwrap();
//! assert_eq!(best, "1.2.4");
//! ```

use semver::{Version, VersionReq};

/// A chart version constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Constraint {
    /// Empty: the highest stable version.
    Latest,
    /// A full version: exactly it (a leading `v` ignored).
    Exact(Version),
    /// Alternatives (`||`), each a conjunction of comparators.
    Ranges(Vec<VersionReq>),
}

impl Constraint {
    /// Parses a constraint as Helm writes them; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Constraint, String> {
        let text = text.trim();
        if text.is_empty() || text == "*" || text == "latest" {
            return Ok(Constraint::Latest);
        }
        if let Some(version) = parse_version(text) {
            return Ok(Constraint::Exact(version));
        }
        let ranges = text
            .split("||")
            .map(|alternative| {
                let comparators: Vec<String> =
                    terms(alternative).iter().map(|t| comparator(t)).collect();
                if comparators.is_empty() {
                    return Err(format!("version {text:?}: an empty alternative"));
                }
                comparators
                    .join(", ")
                    .parse::<VersionReq>()
                    .map_err(|error| format!("version {text:?} is not a semver range: {error}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Constraint::Ranges(ranges))
    }

    /// Whether `version` satisfies the constraint.
    pub fn matches(&self, version: &Version) -> bool {
        match self {
            Constraint::Latest => version.pre.is_empty(),
            Constraint::Exact(wanted) => version == wanted,
            Constraint::Ranges(ranges) => ranges.iter().any(|range| range.matches(version)),
        }
    }

    /// The highest of `candidates` (version strings as published, possibly
    /// with a `v`) that satisfies the constraint, as published.
    pub fn highest<'a>(&self, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
        candidates
            .into_iter()
            .filter_map(|text| parse_version(text).map(|version| (version, text)))
            .filter(|(version, _)| self.matches(version))
            .max_by(|(a, _), (b, _)| a.cmp(b))
            .map(|(_, text)| text)
    }
}

/// A full semver version, with an optional leading `v`.
pub fn parse_version(text: &str) -> Option<Version> {
    Version::parse(text.strip_prefix('v').unwrap_or(text)).ok()
}

/// The terms of one alternative: split at spaces and commas, an operator
/// standing alone (`>= 1.0`) joined to the version after it.
fn terms(alternative: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for part in alternative
        .split([' ', ','])
        .filter(|part| !part.is_empty())
    {
        match terms.last_mut() {
            Some(last) if last.chars().all(|c| "<>=!~^".contains(c)) => last.push_str(part),
            _ => terms.push(part.to_string()),
        }
    }
    terms
}

/// One comparator in Cargo's syntax: `x`/`X` wildcards become `*`, a bare
/// partial version (`1.2`) means `1.2.*`, a `v` after the operator goes.
fn comparator(term: &str) -> String {
    let operator_end = term
        .find(|c: char| c.is_ascii_alphanumeric() || c == '*')
        .unwrap_or(term.len());
    let (operator, version) = term.split_at(operator_end);
    let version = version.strip_prefix('v').unwrap_or(version);
    let version: Vec<&str> = version
        .split('.')
        .map(|part| {
            if part == "x" || part == "X" {
                "*"
            } else {
                part
            }
        })
        .collect();
    let version = version.join(".");
    if operator.is_empty() && !version.contains('*') && version.split('.').count() < 3 {
        return format!("{version}.*");
    }
    if operator.is_empty() && !version.contains('*') {
        return format!("={version}");
    }
    format!("{operator}{version}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn best(constraint: &str, candidates: &[&'static str]) -> Option<&'static str> {
        Constraint::parse(constraint)
            .unwrap()
            .highest(candidates.iter().copied())
    }

    const PUBLISHED: &[&str] = &["1.2.3", "1.2.4", "1.3.0", "2.0.0-rc.1", "v1.1.0", "nightly"];

    #[test]
    fn a_wildcard_takes_the_highest_patch_and_never_the_next_minor() {
        assert_eq!(best("1.2.x", PUBLISHED), Some("1.2.4"));
        assert_eq!(best("1.2.*", PUBLISHED), Some("1.2.4"));
        assert_eq!(best("1.2", PUBLISHED), Some("1.2.4"));
        assert_eq!(best("~1.2.0", PUBLISHED), Some("1.2.4"));
    }

    #[test]
    fn a_full_version_is_exact_as_in_helm() {
        assert_eq!(best("1.2.3", PUBLISHED), Some("1.2.3"));
        assert_eq!(best("v1.1.0", PUBLISHED), Some("v1.1.0"));
        assert_eq!(best("1.2.9", PUBLISHED), None);
    }

    #[test]
    fn ranges_join_terms_by_spaces_or_commas_and_alternatives_by_bars() {
        assert_eq!(best(">=1.2.0 <1.3.0", PUBLISHED), Some("1.2.4"));
        assert_eq!(best(">= 1.0, < 1.2", PUBLISHED), Some("v1.1.0"));
        assert_eq!(best("^1.0", PUBLISHED), Some("1.3.0"));
        assert_eq!(best("1.1.x || 1.2.3", PUBLISHED), Some("1.2.3"));
    }

    #[test]
    fn pre_releases_are_chosen_only_when_asked_for() {
        assert_eq!(best("", PUBLISHED), Some("1.3.0"));
        assert_eq!(best(">=2.0.0-rc.0", PUBLISHED), Some("2.0.0-rc.1"));
        assert_eq!(best("2.0.0-rc.1", PUBLISHED), Some("2.0.0-rc.1"));
    }

    #[test]
    fn a_constraint_that_is_not_semver_is_refused_naming_it() {
        let error = Constraint::parse(">=banana").unwrap_err();
        assert!(error.contains(">=banana"), "{error}");
    }
}
