//! What the destination cluster serves, as renderers ask about it: its
//! Kubernetes version and its API versions (Helm's `.Capabilities`).
//!
//! The `cluster` crate discovers it; the `source` crate passes it to
//! `helm template` and keys the render cache by it. The empty value means
//! "unknown": renderers then use their own defaults (Helm's is v1.20.0).
//!
//! ```
//! use tether_core::capabilities::Capabilities;
//! let served = [("apps/v1".to_string(), vec!["Deployment".to_string()])];
//! let capabilities = Capabilities::from_discovery("v1.33.2", "1", "33", served);
//! assert_eq!(capabilities.kube_version, "v1.33.2");
//! assert!(capabilities.api_versions.contains("apps/v1/Deployment"));
//! ```

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A cluster's version and served API versions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// The API server's version (`v1.33.2`, `v1.31.4-eks-2d5f260`), as
    /// `helm template --kube-version` takes it; empty when unknown.
    pub kube_version: String,
    /// Every served `group/version` and `group/version/Kind` (the core
    /// group without a prefix: `v1`, `v1/Pod`), as `helm template
    /// --api-versions` takes them; sorted, so equal clusters compare equal.
    pub api_versions: BTreeSet<String>,
}

impl Capabilities {
    /// From discovery: the server's `gitVersion`, `major` and `minor`, and
    /// each served group/version with its kinds.
    pub fn from_discovery(
        git_version: &str,
        major: &str,
        minor: &str,
        served: impl IntoIterator<Item = (String, Vec<String>)>,
    ) -> Capabilities {
        let mut api_versions = BTreeSet::new();
        for (group_version, kinds) in served {
            for kind in kinds {
                api_versions.insert(format!("{group_version}/{kind}"));
            }
            api_versions.insert(group_version);
        }
        Capabilities {
            kube_version: kube_version(git_version, major, minor),
            api_versions,
        }
    }

    /// Whether nothing is known (renderers use their defaults).
    pub fn is_unknown(&self) -> bool {
        self.kube_version.is_empty() && self.api_versions.is_empty()
    }

    /// Whether these capabilities already list every group/version that
    /// the CustomResourceDefinitions among `objects` serve: when not, a
    /// CRD is new (or changed) and they are out of date.
    pub fn serve_all_crds<'a>(&self, objects: impl IntoIterator<Item = &'a Value>) -> bool {
        objects
            .into_iter()
            .flat_map(crd_group_versions)
            .all(|group_version| self.api_versions.contains(&group_version))
    }
}

/// The `group/version`s a CustomResourceDefinition serves (none for any
/// other object).
pub fn crd_group_versions(object: &Value) -> Vec<String> {
    let is_crd = object["kind"] == "CustomResourceDefinition"
        && object["apiVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("apiextensions.k8s.io/"));
    let group = object["spec"]["group"].as_str().unwrap_or_default();
    if !is_crd || group.is_empty() {
        return Vec::new();
    }
    let versions = object["spec"]["versions"].as_array();
    versions
        .into_iter()
        .flatten()
        .filter(|version| version["served"].as_bool().unwrap_or(true))
        .filter_map(|version| version["name"].as_str())
        .map(|version| format!("{group}/{version}"))
        .collect()
}

/// The version to give renderers: `git_version` when it is a version
/// (`v1.33.2`, with any pre-release or build suffix), else one made of
/// `major` and `minor` (`minor` may carry a `+`, as on GKE and EKS); empty
/// when neither says anything.
pub fn kube_version(git_version: &str, major: &str, minor: &str) -> String {
    let numbers = git_version.trim_start_matches('v');
    let core = numbers.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    let is_version = parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    // Built from source without version stamping: v0.0.0-master+$Format.
    if is_version && parts[0] != "0" {
        return format!("v{numbers}");
    }
    let digits = |text: &str| -> String { text.chars().take_while(char::is_ascii_digit).collect() };
    match (digits(major), digits(minor)) {
        (major, minor) if !major.is_empty() && !minor.is_empty() => {
            format!("v{major}.{minor}.0")
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_git_version_or_else_major_and_minor() {
        assert_eq!(kube_version("v1.33.2", "1", "33"), "v1.33.2");
        assert_eq!(
            kube_version("v1.31.4-eks-2d5f260", "1", "31+"),
            "v1.31.4-eks-2d5f260"
        );
        assert_eq!(kube_version("v1.30.1+k3s1", "1", "30"), "v1.30.1+k3s1");
        assert_eq!(kube_version("v0.0.0-master+$Format", "1", "34+"), "v1.34.0");
        assert_eq!(kube_version("", "1", "29"), "v1.29.0");
        assert_eq!(kube_version("", "", ""), "");
    }

    #[test]
    fn api_versions_list_each_group_version_and_its_kinds() {
        let served = [
            (
                "v1".to_string(),
                vec!["Pod".to_string(), "Service".to_string()],
            ),
            ("monitoring.example.com/v1".to_string(), vec![]),
        ];
        let capabilities = Capabilities::from_discovery("v1.33.0", "1", "33", served);
        let listed: Vec<&str> = capabilities
            .api_versions
            .iter()
            .map(String::as_str)
            .collect();
        assert_eq!(
            listed,
            ["monitoring.example.com/v1", "v1", "v1/Pod", "v1/Service"]
        );
        assert!(!capabilities.is_unknown());
        assert!(Capabilities::default().is_unknown());
    }

    #[test]
    fn a_crd_serving_a_version_not_yet_discovered_makes_capabilities_stale() {
        let crd = |versions: serde_json::Value| {
            serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "spec": {"group": "monitoring.example.com", "versions": versions}})
        };
        let served = [("monitoring.example.com/v1".to_string(), vec![])];
        let capabilities = Capabilities::from_discovery("v1.33.0", "1", "33", served);
        let v1 = crd(serde_json::json!([{"name": "v1", "served": true}]));
        let v2 = crd(
            serde_json::json!([{"name": "v1", "served": true}, {"name": "v2", "served": true}]),
        );
        let v2_unserved = crd(serde_json::json!([{"name": "v1"}, {"name": "v2", "served": false}]));
        let config_map = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert!(capabilities.serve_all_crds([&v1, &config_map]));
        assert!(capabilities.serve_all_crds([&v2_unserved]));
        assert!(!capabilities.serve_all_crds([&v1, &v2]));
        assert_eq!(
            crd_group_versions(&v2),
            ["monitoring.example.com/v1", "monitoring.example.com/v2"]
        );
    }
}
