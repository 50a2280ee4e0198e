//! A Helm repository's `index.yaml`: which versions of which charts it
//! publishes, where their archives are and what their SHA-256 digests are.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::version::Constraint;

/// The parts of `index.yaml` Tether reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Index {
    #[serde(default)]
    pub entries: BTreeMap<String, Vec<Entry>>,
}

/// One published version of a chart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Entry {
    pub version: String,
    /// The archive's SHA-256 (hex), when the index gives it.
    #[serde(default)]
    pub digest: String,
    /// Where the archive is: absolute, or relative to the repository URL.
    #[serde(default)]
    pub urls: Vec<String>,
}

impl Index {
    /// Parses an index; the error names what is wrong (not the text).
    pub fn parse(bytes: &[u8]) -> Result<Index, String> {
        let text = std::str::from_utf8(bytes).map_err(|_| "index.yaml is not UTF-8".to_string())?;
        serde_saphyr::from_str(text).map_err(|error| format!("index.yaml does not parse: {error}"))
    }

    /// The highest published version of `chart` that `constraint` allows.
    /// The error says whether the chart is missing or which versions exist.
    pub fn choose(&self, chart: &str, constraint: &Constraint) -> Result<&Entry, String> {
        let entries = self
            .entries
            .get(chart)
            .filter(|entries| !entries.is_empty())
            .ok_or_else(|| format!("chart {chart:?} is not in the repository's index"))?;
        let best = constraint
            .highest(entries.iter().map(|entry| entry.version.as_str()))
            .ok_or_else(|| {
                no_match(
                    chart,
                    constraint,
                    entries.iter().map(|e| e.version.as_str()),
                )
            })?;
        Ok(entries
            .iter()
            .find(|entry| entry.version == best)
            .expect("chosen among them"))
    }
}

/// "no version of CHART matches …; published: …" with the highest few.
pub fn no_match<'a>(
    chart: &str,
    constraint: &Constraint,
    published: impl Iterator<Item = &'a str>,
) -> String {
    let mut versions: Vec<(semver::Version, &str)> = published
        .filter_map(|text| super::version::parse_version(text).map(|v| (v, text)))
        .collect();
    versions.sort();
    let shown: Vec<&str> = versions
        .iter()
        .rev()
        .take(8)
        .map(|(_, text)| *text)
        .collect();
    let wanted = match constraint {
        Constraint::Latest => "a stable version".to_string(),
        Constraint::Exact(version) => format!("version {version}"),
        Constraint::Ranges(ranges) => format!(
            "version {}",
            ranges
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" || ")
        ),
    };
    format!(
        "no {wanted} of chart {chart:?} is published (newest: {})",
        if shown.is_empty() {
            "none".to_string()
        } else {
            shown.join(", ")
        }
    )
}

/// The archive URL of `entry` in the repository at `repository`: its first
/// URL, resolved against the repository's (as Helm does).
pub fn archive_url(repository: &str, entry: &Entry) -> Result<String, String> {
    let first = entry
        .urls
        .first()
        .ok_or_else(|| format!("version {} lists no archive URL", entry.version))?;
    let base = format!("{}/", repository.trim_end_matches('/'));
    let base = reqwest::Url::parse(&base).map_err(|error| format!("{repository}: {error}"))?;
    base.join(first)
        .map(String::from)
        .map_err(|error| format!("archive URL {first:?}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = r#"
apiVersion: v1
entries:
  web:
  - apiVersion: v2
    name: web
    version: 1.2.4
    digest: 4b1c
    urls: [web-1.2.4.tgz]
    created: "2026-01-01T00:00:00Z"
  - name: web
    version: 1.2.3
    digest: 9a8b
    urls: ["https://cdn.example.com/web-1.2.3.tgz"]
  - name: web
    version: 1.3.0
    urls: [charts/web-1.3.0.tgz]
generated: "2026-01-01T00:00:00Z"
"#;

    #[test]
    fn the_highest_allowed_version_is_chosen_with_its_digest() {
        let index = Index::parse(INDEX.as_bytes()).unwrap();
        let entry = index
            .choose("web", &Constraint::parse("1.2.x").unwrap())
            .unwrap();
        assert_eq!(
            (entry.version.as_str(), entry.digest.as_str()),
            ("1.2.4", "4b1c")
        );
    }

    #[test]
    fn archive_urls_are_relative_to_the_repository_unless_absolute() {
        let index = Index::parse(INDEX.as_bytes()).unwrap();
        let url = |version: &str| {
            let entry = index
                .choose("web", &Constraint::parse(version).unwrap())
                .unwrap();
            archive_url("https://charts.example.com/stable", entry).unwrap()
        };
        assert_eq!(
            url("1.2.4"),
            "https://charts.example.com/stable/web-1.2.4.tgz"
        );
        assert_eq!(url("1.2.3"), "https://cdn.example.com/web-1.2.3.tgz");
        assert_eq!(
            url("1.3.0"),
            "https://charts.example.com/stable/charts/web-1.3.0.tgz"
        );
    }

    #[test]
    fn a_missing_chart_or_version_says_what_is_published() {
        let index = Index::parse(INDEX.as_bytes()).unwrap();
        let missing = index.choose("api", &Constraint::Latest).unwrap_err();
        assert!(missing.contains("chart \"api\" is not in"), "{missing}");
        let none = index
            .choose("web", &Constraint::parse("2.x").unwrap())
            .unwrap_err();
        assert!(none.contains("newest: 1.3.0, 1.2.4, 1.2.3"), "{none}");
    }
}
