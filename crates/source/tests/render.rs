//! Renderers on local directories: plain YAML/JSON bad input, Kustomize
//! through kubectl, Helm when a `helm` binary exists, and the sandbox's
//! limits.

mod common;

use std::path::Path;
use std::time::Duration;

use common::chart;
use tether_source::Capabilities;
use tether_source::spec::{HelmOptions, KustomizeOptions};
use tether_source::{DirectoryOptions, Renderer, Sandbox, render_local};
use tether_testkit::tools::helm_dir;
use tether_testkit::{write_file, write_script};

fn cm(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n")
}

/// A temporary directory holding `files` (path, text).
fn layout(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        write_file(dir.path(), path, text);
    }
    dir
}

fn plain(dir: &Path) -> Result<tether_source::Rendered, tether_source::SourceError> {
    render_local(
        dir,
        &Renderer::default(),
        &Sandbox::default(),
        &Default::default(),
    )
}

#[test]
fn plain_directories_are_read_recursively_in_sorted_order_ignoring_other_files() {
    let dir = layout(&[
        ("b/z.yml", &cm("z")),
        (
            "a.json",
            r#"{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]}"#,
        ),
        ("b/a.yaml", &format!("{}---\n{}", cm("a1"), cm("a2"))),
        ("README.md", "not: [a manifest"),
        ("notes.txt", "ignored"),
    ]);
    let rendered = plain(dir.path()).unwrap();
    let seen: Vec<String> = rendered
        .manifests
        .iter()
        .map(|m| format!("{} @ {}", m.id, m.origin))
        .collect();
    assert_eq!(
        seen,
        vec![
            "Secret s @ a.json:1 (item 1)",
            "ConfigMap a1 @ b/a.yaml:1",
            "ConfigMap a2 @ b/a.yaml:6",
            "ConfigMap z @ b/z.yml:1",
        ]
    );
}

#[test]
fn include_and_exclude_globs_select_files() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "prod/a.yaml", &cm("a"));
    write_file(dir.path(), "prod/test-b.yaml", &cm("b"));
    write_file(dir.path(), "dev/c.yaml", &cm("c"));
    let options = DirectoryOptions {
        include: vec!["prod/**".into()],
        exclude: vec!["**/test-*".into()],
    };
    let rendered = render_local(
        dir.path(),
        &Renderer::Directory(options),
        &Sandbox::default(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(rendered.manifests.len(), 1);
    assert_eq!(rendered.manifests[0].id.name, "a");
}

#[test]
fn bad_input_is_an_error_naming_file_and_line_and_nothing_is_rendered() {
    let cases = [
        (
            "web.yaml",
            format!("{}---\nkind: ConfigMap\nmetadata: {{name: x}}\n", cm("ok")),
            "web.yaml:6: missing field `apiVersion`",
        ),
        (
            "web.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n".to_string(),
            "web.yaml:1: missing field `metadata.name`",
        ),
        (
            "web.yaml",
            "apiVersion: v1\nkind: ConfigMap\n".to_string(),
            "web.yaml:1: missing field `metadata`",
        ),
        (
            "web.yaml",
            format!("{}---\n- just\n- a list\n", cm("ok")),
            "web.yaml:6: not a mapping",
        ),
        ("web.json", "{\n  \"kind\": \n}".to_string(), "web.json:3: "),
        ("web.yaml", format!("{}  bad: [\n", cm("ok")), "web.yaml:"),
    ];
    for (file, text, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        write_file(dir.path(), "0-fine.yaml", &cm("fine"));
        write_file(dir.path(), file, &text);
        let error = plain(dir.path()).unwrap_err().to_string();
        assert!(
            error.starts_with(expected),
            "{file}: expected {expected:?}, got {error:?}"
        );
    }
}

#[test]
fn the_same_object_declared_twice_names_both_places() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "a.yaml", &cm("web"));
    write_file(dir.path(), "b/c.yaml", &format!("# x\n{}", cm("web")));
    let error = plain(dir.path()).unwrap_err().to_string();
    assert_eq!(
        error,
        "ConfigMap web is declared twice: at a.yaml:1 and at b/c.yaml:2"
    );
}

#[test]
fn symlinks_that_escape_the_repository_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    write_file(
        dir.path(),
        "app/kustomization.yaml",
        "resources: [cm.yaml]\n",
    );
    std::os::unix::fs::symlink("../../../etc/passwd", dir.path().join("app/cm.yaml")).unwrap();
    let error = render_local(
        dir.path(),
        &Renderer::Kustomize(KustomizeOptions {}),
        &Sandbox::default(),
        &Default::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("app/cm.yaml: symlink to \"../../../etc/passwd\" leaves the repository"),
        "{error}"
    );
    let error = plain(dir.path()).unwrap_err().to_string();
    assert!(error.contains("app/cm.yaml: is a symlink"), "{error}");
}

#[test]
fn kustomize_renders_through_kubectl_or_kustomize() {
    let dir = layout(&[
        ("base/cm.yaml", &cm("web")),
        ("base/kustomization.yaml", "resources: [cm.yaml]\n"),
        (
            "prod/kustomization.yaml",
            "resources: [../base]\nnamespace: prod\nnamePrefix: prod-\n",
        ),
    ]);
    let renderer = Renderer::Kustomize(KustomizeOptions {});
    let files = tether_source::files::Files::read_dir(dir.path()).unwrap();
    let manifests = tether_source::render::render(
        &renderer,
        &files,
        "prod",
        &Sandbox::default(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(manifests.len(), 1);
    assert_eq!(manifests[0].id.to_string(), "ConfigMap prod/prod-web");
    assert_eq!(manifests[0].origin.to_string(), "prod (kustomize output):1");
}

#[test]
fn helm_template_renders_a_chart_with_values_files_and_inline_values() {
    let Some(helm) = helm_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Replicas 1 and color blue by default, replicas 3 in prod.yaml.
    chart("web-configmap", dir.path());
    let renderer = Renderer::Helm(HelmOptions {
        release_name: "shop".into(),
        namespace: "prod".into(),
        value_files: vec!["prod.yaml".into()],
        values: "color: green\n".into(),
    });
    let files = tether_source::files::Files::read_dir(dir.path()).unwrap();
    let sandbox = Sandbox {
        tool_dirs: vec![helm],
        ..Sandbox::default()
    };
    let manifests =
        tether_source::render::render(&renderer, &files, "chart", &sandbox, &Default::default())
            .unwrap();
    assert_eq!(manifests[0].id.to_string(), "ConfigMap prod/shop-cm");
    assert_eq!(manifests[0].object["data"]["replicas"], "3");
    assert_eq!(manifests[0].object["data"]["color"], "green");
}

#[test]
fn helm_renders_for_the_clusters_version_and_api_versions() {
    let Some(helm) = helm_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    chart("capabilities", dir.path());
    let files = tether_source::files::Files::read_dir(dir.path()).unwrap();
    let sandbox = Sandbox {
        tool_dirs: vec![helm],
        ..Sandbox::default()
    };
    let renderer = Renderer::Helm(HelmOptions::default());
    let render = |capabilities: &Capabilities| {
        tether_source::render::render(&renderer, &files, "chart", &sandbox, capabilities)
    };
    // Helm's offline default is Kubernetes v1.20.0.
    let error = render(&Capabilities::default()).unwrap_err().to_string();
    assert!(error.contains("kubeVersion"), "{error}");
    let served = [(
        "monitoring.example.com/v1".to_string(),
        vec!["Probe".to_string()],
    )];
    let cluster = Capabilities::from_discovery("v1.34.1", "1", "34", served);
    let manifests = render(&cluster).unwrap();
    assert_eq!(manifests[0].object["data"]["kubeVersion"], "v1.34.1");
    assert_eq!(manifests[0].object["data"]["probes"], "served");
    let without_crd = Capabilities::from_discovery("v1.34.1", "1", "34", []);
    let manifests = render(&without_crd).unwrap();
    assert_eq!(manifests[0].object["data"].get("probes"), None);
}

/// A directory holding a fake `kustomize` shell script.
fn fake_kustomize(script: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_script(dir.path(), "kustomize", &format!("#!/bin/bash\n{script}\n"));
    dir
}

#[test]
fn a_renderer_that_hangs_or_floods_output_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "kustomization.yaml", "resources: []\n");
    let renderer = Renderer::Kustomize(KustomizeOptions {});
    let hang = fake_kustomize("sleep 30");
    let sandbox = Sandbox {
        timeout: Duration::from_millis(500),
        tool_dirs: vec![hang.path().into()],
        ..Sandbox::default()
    };
    let started = std::time::Instant::now();
    let error = render_local(dir.path(), &renderer, &sandbox, &Default::default()).unwrap_err();
    assert_eq!(error.to_string(), "kustomize: timed out after 500ms");
    assert!(error.is_retryable());
    assert!(started.elapsed() < Duration::from_secs(10));

    let flood = fake_kustomize("yes 'a: b'");
    let sandbox = Sandbox {
        max_output_bytes: 4096,
        tool_dirs: vec![flood.path().into()],
        ..Sandbox::default()
    };
    let error = render_local(dir.path(), &renderer, &sandbox, &Default::default()).unwrap_err();
    assert_eq!(error.to_string(), "kustomize: output exceeds 4096 bytes");
}

#[test]
fn a_renderer_has_no_network() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "kustomization.yaml", "resources: []\n");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Exits 0 only if it can reach a server on the host's loopback.
    let probe = fake_kustomize(&format!(
        "(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && {{ echo reached >&2; exit 1; }}\necho '---'"
    ));
    let sandbox = Sandbox {
        tool_dirs: vec![probe.path().into()],
        ..Sandbox::default()
    };
    let rendered = render_local(
        dir.path(),
        &Renderer::Kustomize(KustomizeOptions {}),
        &sandbox,
        &Default::default(),
    )
    .unwrap();
    assert!(rendered.empty);
}
