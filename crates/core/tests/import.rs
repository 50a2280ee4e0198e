//! `tether import` against fixtures (`fixtures/import/`, see its README):
//! each case's Argo CD or Flux objects must become exactly the Tether
//! objects of `CASE.expected.yaml`, with exactly the report lines of
//! `CASE.report`. `TETHER_BLESS=1` writes both from what import makes,
//! to be read and checked by hand before committing.

#[path = "common/yaml_files.rs"]
mod yaml_files;

use std::path::{Path, PathBuf};

use serde_json::Value;
use tether_core::import::{Imported, Input, Options, Place, Renderer, import, read};
use yaml_files::yaml_files;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/import")
}

/// The YAML files of a case (a file, or every file under a directory), in
/// path order, read as import reads them, named relative to the root.
fn inputs(case: &Path) -> Vec<Input> {
    yaml_files(case)
        .iter()
        .flat_map(|file| {
            let name = file.strip_prefix(root()).unwrap().display().to_string();
            let text = std::fs::read_to_string(file).unwrap();
            read(&name, &text).unwrap_or_else(|error| panic!("{error}"))
        })
        .collect()
}

/// Detects a renderer from the files of a repository laid out under the
/// root, as the CLI does from a fetched one.
fn detect(place: &Place) -> Result<Renderer, String> {
    let repo = place.repo_url.trim_end_matches(".git");
    let dir = match repo.rsplit('/').next() {
        Some("argocd-example-apps") => root().join("repos/argocd-example-apps"),
        Some("fleet-infra") => root().join("flux/fleet-infra"),
        _ => return Err(format!("{}: no credentials to read it", place.repo_url)),
    };
    let names: Vec<String> = std::fs::read_dir(dir.join(&place.path))
        .map_err(|error| format!("{}: {error}", place.path))?
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    Ok(if names.iter().any(|n| n == "kustomization.yaml") {
        Renderer::Kustomize
    } else if names.iter().any(|n| n == "Chart.yaml") {
        Renderer::Helm
    } else if let Some(main) = names.iter().find(|n| n.ends_with(".jsonnet")) {
        Renderer::Jsonnet { main: main.clone() }
    } else {
        Renderer::Directory
    })
}

fn cases() -> Vec<PathBuf> {
    let mut cases = Vec::new();
    for tool in ["argocd", "flux"] {
        for entry in std::fs::read_dir(root().join(tool)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() || (name.ends_with(".yaml") && !name.ends_with(".expected.yaml")) {
                cases.push(path);
            }
        }
    }
    cases.sort();
    cases
}

fn expected_path(case: &Path, extension: &str) -> PathBuf {
    let stem = case.file_name().unwrap().to_string_lossy();
    let stem = stem.strip_suffix(".yaml").unwrap_or(&stem);
    case.with_file_name(format!("{stem}.{extension}"))
}

fn run(case: &Path) -> Imported {
    import(&inputs(case), &Options::default(), &mut detect)
}

#[test]
fn every_argocd_and_flux_fixture_imports_as_expected_with_its_report() {
    let bless = std::env::var("TETHER_BLESS").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    let cases = cases();
    assert!(cases.len() >= 10, "{cases:?}");
    for case in &cases {
        let imported = run(case);
        let objects_path = expected_path(case, "expected.yaml");
        let report_path = expected_path(case, "report");
        let report: Vec<String> = imported.findings.iter().map(|f| f.to_string()).collect();
        if bless {
            let yaml: Vec<String> = imported
                .objects
                .iter()
                .map(|o| serde_saphyr::to_string(o).unwrap())
                .collect();
            std::fs::write(&objects_path, yaml.join("---\n")).unwrap();
            let mut text = report.join("\n");
            text.push('\n');
            std::fs::write(&report_path, text.trim_start()).unwrap();
            continue;
        }
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let expected_text = std::fs::read_to_string(&objects_path)
            .unwrap_or_else(|error| panic!("{}: {error}", objects_path.display()));
        let expected: Vec<Value> = read("expected", &expected_text)
            .unwrap()
            .into_iter()
            .map(|input| input.object)
            .collect();
        if expected != imported.objects {
            let actual: Vec<String> = imported
                .objects
                .iter()
                .map(|o| serde_saphyr::to_string(o).unwrap())
                .collect();
            failures.push(format!(
                "{name}: objects differ; made:\n{}",
                actual.join("---\n")
            ));
        }
        let expected_report: Vec<String> = std::fs::read_to_string(&report_path)
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.is_empty())
            .map(str::to_string)
            .collect();
        if expected_report != report {
            failures.push(format!(
                "{name}: report differs; made:\n{}",
                report.join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_imported_application_takes_over_what_exists_instead_of_refusing_it() {
    for case in cases() {
        for object in run(&case).objects {
            if object["kind"] == "Application" {
                assert_eq!(
                    object.pointer("/spec/syncPolicy/adoptExisting"),
                    Some(&Value::Bool(true)),
                    "{}: {object}",
                    case.display()
                );
            }
        }
    }
}

#[test]
fn a_flux_repository_layout_skips_kustomize_patches_and_plain_objects() {
    let imported = run(&root().join("flux/fleet-infra"));
    let names: Vec<&str> = imported
        .objects
        .iter()
        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    assert_eq!(
        names,
        [
            "podinfo",
            "apps",
            "flux-system",
            "infra-controllers",
            "ingress-nginx"
        ]
    );
    assert!(imported.skipped >= 5, "{}", imported.skipped);
}
