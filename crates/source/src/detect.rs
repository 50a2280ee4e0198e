//! Which renderer a directory needs, judged from the names of its files as
//! Argo CD judges it: a kustomization (`kustomization.yaml`,
//! `kustomization.yml` or `Kustomization`) means Kustomize, a `Chart.yaml`
//! means Helm, any `*.jsonnet` file means Jsonnet, anything else is a plain
//! directory of manifests.
//!
//! `tether app create` uses it when no `--renderer` is given, and the
//! directory renderer uses it to say, when a directory fails to render as
//! plain YAML, which renderer it was meant for.
//!
//! A pure function of the names that leans on no other module (the
//! directory renderer and the spec both call it); the spec makes a
//! renderer of a [`Detection`] (`Renderer::detect`, `Renderer::detected`).
//!
//! ```
//! use tether_source::detect::{RendererKind, detect};
//! assert_eq!(detect(&["kustomization.yaml", "deploy.yaml"]).kind, RendererKind::Kustomize);
//! assert_eq!(detect(&["deploy.yaml"]).kind, RendererKind::Directory);
//! ```

/// The file names that make a directory a kustomization, in the order
/// kustomize looks for them.
pub const KUSTOMIZATION_FILES: [&str; 3] =
    ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// The file that makes a directory a Helm chart.
pub const CHART_FILE: &str = "Chart.yaml";

/// The Jsonnet entry file the Jsonnet renderer reads by default.
pub const JSONNET_MAIN: &str = "main.jsonnet";

tether_core::vocabulary! {
    /// The four renderers, without their options: each word is the
    /// renderer's name as `spec.source.renderer` and `--renderer` spell it.
    pub enum RendererKind("renderer") {
        Directory = "directory",
        Kustomize = "kustomize",
        Helm = "helm",
        Jsonnet = "jsonnet",
    }
}

/// A renderer chosen from a directory's file names, and the file that
/// decided it (`None` for a plain directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detection {
    pub kind: RendererKind,
    /// The file name that decided it: the kustomization, `Chart.yaml`, or
    /// the Jsonnet entry file.
    pub file: Option<String>,
    /// For Jsonnet, the entry file when it is not `main.jsonnet` (the
    /// renderer's default); empty otherwise.
    pub jsonnet_main: String,
}

/// The renderer a directory needs, from the names of the files directly in
/// it. Names with a `/` (files in subdirectories) are ignored, so a
/// recursive listing may be passed as it is. When a directory is more than
/// one kind, the first of kustomization, chart, Jsonnet wins (Argo CD too
/// prefers Kustomize over Helm).
///
/// For Jsonnet the entry file is `main.jsonnet` (the renderer's default)
/// when there is one, else the first `*.jsonnet` file by name.
pub fn detect<S: AsRef<str>>(names: &[S]) -> Detection {
    let mut names: Vec<&str> = names
        .iter()
        .map(AsRef::as_ref)
        .filter(|name| !name.contains('/'))
        .collect();
    names.sort_unstable();
    let has = |file: &str| names.contains(&file);
    let found = |kind, file: &str| Detection {
        kind,
        file: Some(file.to_string()),
        jsonnet_main: String::new(),
    };
    if let Some(file) = KUSTOMIZATION_FILES.into_iter().find(|f| has(f)) {
        return found(RendererKind::Kustomize, file);
    }
    if has(CHART_FILE) {
        return found(RendererKind::Helm, CHART_FILE);
    }
    let jsonnet = |name: &&str| name.len() > ".jsonnet".len() && name.ends_with(".jsonnet");
    if let Some(first) = names.iter().copied().find(jsonnet) {
        if has(JSONNET_MAIN) {
            return found(RendererKind::Jsonnet, JSONNET_MAIN);
        }
        return Detection {
            jsonnet_main: first.to_string(),
            ..found(RendererKind::Jsonnet, first)
        };
    }
    Detection {
        kind: RendererKind::Directory,
        file: None,
        jsonnet_main: String::new(),
    }
}

/// What a directory of another renderer's files is, in words, for an error
/// that found it read as plain YAML: "a kustomization", "a Helm chart";
/// `None` for a plain directory (and for Jsonnet, whose files the directory
/// renderer never reads).
pub fn described<S: AsRef<str>>(names: &[S]) -> Option<(&'static str, Detection)> {
    let detection = detect(names);
    let what = match detection.kind {
        RendererKind::Kustomize => "a kustomization",
        RendererKind::Helm => "a Helm chart",
        RendererKind::Directory | RendererKind::Jsonnet => return None,
    };
    Some((what, detection))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(names: &[&str]) -> &'static str {
        detect(names).kind.as_str()
    }

    /// What `names` are detected as, checked to be `kind` because of `file`.
    fn detected(names: &[&str], kind: RendererKind, file: &str) -> Detection {
        let detection = detect(names);
        assert_eq!(
            (detection.kind, detection.file.as_deref()),
            (kind, Some(file)),
            "{names:?}"
        );
        detection
    }

    #[test]
    fn each_kustomization_file_name_means_kustomize() {
        for file in KUSTOMIZATION_FILES {
            detected(&[file, "deployment.yaml"], RendererKind::Kustomize, file);
        }
        // Names are case-sensitive, as kustomize reads them.
        assert_eq!(name(&["KUSTOMIZATION.yaml"]), "directory");
    }

    #[test]
    fn a_chart_yaml_means_helm() {
        let chart = ["Chart.yaml", "values.yaml", "templates/deploy.yaml"];
        detected(&chart, RendererKind::Helm, "Chart.yaml");
        assert_eq!(name(&["chart.yaml"]), "directory");
    }

    #[test]
    fn any_jsonnet_file_means_jsonnet_with_main_jsonnet_preferred() {
        let main = ["a.jsonnet", "main.jsonnet", "lib.libsonnet"];
        let main = detected(&main, RendererKind::Jsonnet, "main.jsonnet");
        assert_eq!(main.jsonnet_main, "");
        let other = ["lib.libsonnet", "guestbook-ui.jsonnet", "app.jsonnet"];
        let other = detected(&other, RendererKind::Jsonnet, "app.jsonnet");
        assert_eq!(other.jsonnet_main, "app.jsonnet");
        // A library alone is not a program, nor is a file named `.jsonnet`.
        assert_eq!(name(&["lib.libsonnet"]), "directory");
        assert_eq!(name(&[".jsonnet"]), "directory");
    }

    #[test]
    fn anything_else_is_a_plain_directory() {
        assert_eq!(
            name(&["deploy.yaml", "service.json", "README.md"]),
            "directory"
        );
        assert_eq!(name(&[]), "directory");
        assert_eq!(detect(&["deploy.yaml"]).file, None);
    }

    #[test]
    fn only_the_directory_itself_counts_not_its_subdirectories() {
        assert_eq!(
            name(&["base/kustomization.yaml", "deploy.yaml"]),
            "directory"
        );
        assert_eq!(name(&["charts/redis/Chart.yaml"]), "directory");
        assert_eq!(name(&["lib/x.jsonnet"]), "directory");
    }

    #[test]
    fn kustomize_wins_over_helm_and_helm_over_jsonnet() {
        assert_eq!(name(&["Chart.yaml", "kustomization.yaml"]), "kustomize");
        assert_eq!(name(&["main.jsonnet", "Chart.yaml"]), "helm");
    }

    #[test]
    fn only_kustomizations_and_charts_are_described_for_the_directory_hint() {
        let (what, detection) = described(&["Kustomization"]).unwrap();
        assert_eq!(what, "a kustomization");
        assert_eq!(detection.file.as_deref(), Some("Kustomization"));
        assert_eq!(described(&["Chart.yaml"]).unwrap().0, "a Helm chart");
        assert!(described(&["main.jsonnet"]).is_none());
        assert!(described(&["deploy.yaml"]).is_none());
    }
}
