//! The renderers against a hostile repository (security review, issue 12):
//! symlink chains, host files, Kustomize paths and remote bases, Jsonnet
//! memory and time bombs, YAML alias bombs, huge files and too many
//! objects. Each test is the attack; none may leak a host file or take the
//! test process's memory with it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tether_source::files::Files;
use tether_source::render::{Limits, SandboxMode, render};
use tether_source::spec::{HelmOptions, JsonnetOptions, KustomizeOptions};
use tether_source::{DirectoryOptions, Renderer, Sandbox};
use tether_testkit::{alias_bomb, alias_document, write_file, write_script};

/// The secret every attack tries to read.
const SECRET: &str = "tether-test-admin-token-5f3a9c";

/// Tests that measure this process's memory run one at a time.
static MEMORY: Mutex<()> = Mutex::new(());

fn symlink(root: &Path, path: &str, target: &str) {
    let link = root.join(path);
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// A directory outside the repository holding a kubeconfig with [`SECRET`].
fn host_secret() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kubeconfig");
    std::fs::write(&file, format!("token: {SECRET}\n")).unwrap();
    (dir, file)
}

fn sandbox(mode: SandboxMode) -> Sandbox {
    Sandbox {
        mode,
        tool_dirs: tether_testkit::tools::tool_dirs(),
        render_program: env!("CARGO_BIN_EXE_tether-render").into(),
        ..Sandbox::default()
    }
}

fn render_dir(
    dir: &Path,
    renderer: &Renderer,
    path: &str,
    sandbox: &Sandbox,
) -> Result<Vec<tether_source::Manifest>, tether_source::render::RenderError> {
    render(
        renderer,
        &Files::read_dir(dir).unwrap(),
        path,
        sandbox,
        &Default::default(),
    )
}

/// `dir` as plain YAML under the required sandbox.
fn render_plain(
    dir: &Path,
) -> Result<Vec<tether_source::Manifest>, tether_source::render::RenderError> {
    render_dir(
        dir,
        &Renderer::default(),
        "",
        &sandbox(SandboxMode::Required),
    )
}

fn helm_is_installed(sandbox: &Sandbox) -> bool {
    let found = sandbox.tool_dirs.iter().any(|d| d.join("helm").is_file());
    if !found {
        println!("SKIPPED: no `helm` (run `. scripts/setup.sh`)");
    }
    found
}

fn chart(root: &Path, template: &str) {
    write_file(
        root,
        "chart/Chart.yaml",
        "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    );
    write_file(root, "chart/templates/cm.yaml", template);
}

/// `kB`: peak resident memory of this process since the last reset.
fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Resets the peak to the current resident size (Linux `clear_refs` 5).
fn reset_peak_rss() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    peak_rss_kb()
}

#[test]
fn a_symlink_chain_through_another_link_cannot_leave_the_repository() {
    let sandbox = sandbox(SandboxMode::Required);
    if !helm_is_installed(&sandbox) {
        return;
    }
    let (_host, secret) = host_secret();
    let repo = tempfile::tempdir().unwrap();
    chart(
        repo.path(),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: leak\ndata:\n  kc: {{ .Files.Get \"kc\" | quote }}\n",
    );
    // `up` leads back to the root; by its text alone, `kc` never climbs
    // above it (7 components down, 6 up), but followed through `up` its six
    // `..` reach the host's `/`.
    symlink(repo.path(), "l/m/n/o/p/q/up", "../../../../../../");
    let target = format!(
        "../l/m/n/o/p/q/up/../../../../../..{}",
        secret.to_string_lossy()
    );
    symlink(repo.path(), "chart/kc", &target);
    let renderer = Renderer::Helm(HelmOptions::default());
    for mode in [SandboxMode::Required, SandboxMode::Off] {
        let sandbox = Sandbox {
            mode,
            ..sandbox.clone()
        };
        let error = render_dir(repo.path(), &renderer, "chart", &sandbox)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(&format!(
                "chart/kc: symlink to {target:?} leaves the repository"
            )),
            "{mode}: {error}"
        );
        assert!(!error.contains(SECRET), "{error}");
    }
    // A values file named through the same link is refused too.
    std::fs::remove_file(repo.path().join("chart/kc")).unwrap();
    let value_file = target;
    let renderer = Renderer::Helm(HelmOptions {
        value_files: vec![value_file.clone()],
        ..Default::default()
    });
    let error = render_dir(repo.path(), &renderer, "chart", &sandbox)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!("{value_file}: valueFiles leaves the repository")),
        "{error}"
    );
}

/// A stand-in `helm` that reads host files by absolute path, as a helm
/// that followed a link a check had missed would.
fn prying_helm(secret: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "#!/bin/bash\n\
         secret=$(cat {} 2>/dev/null)\n\
         host=$(ls /etc /root /home /var 2>/dev/null | head -c 300 | tr -d '\\n\"')\n\
         printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: probe\\ndata:\\n  secret: \"%s\"\\n  host: \"%s\"\\n' \"$secret\" \"$host\"\n",
        secret.display()
    );
    write_script(dir.path(), "helm", &script);
    dir
}

#[test]
fn helm_cannot_read_host_files_even_if_a_link_check_misses_one() {
    let (_host, secret) = host_secret();
    let repo = tempfile::tempdir().unwrap();
    chart(repo.path(), "unused: true\n");
    let helm = prying_helm(&secret);
    let renderer = Renderer::Helm(HelmOptions::default());
    let with = |mode| Sandbox {
        mode,
        tool_dirs: vec![helm.path().into()],
        ..sandbox(mode)
    };
    let outside = render_dir(repo.path(), &renderer, "chart", &with(SandboxMode::Off)).unwrap();
    assert!(
        outside[0].object["data"]["secret"]
            .as_str()
            .unwrap()
            .contains(SECRET),
        "without the sandbox the host file is readable: the probe works"
    );
    let inside = render_dir(
        repo.path(),
        &renderer,
        "chart",
        &with(SandboxMode::Required),
    )
    .unwrap();
    assert_eq!(inside[0].object["data"]["secret"], "", "{inside:?}");
    assert_eq!(
        inside[0].object["data"]["host"], "",
        "/etc, /root, /home, /var"
    );
}

#[test]
fn a_sandbox_that_cannot_start_is_a_clear_error() {
    let repo = tempfile::tempdir().unwrap();
    chart(repo.path(), "unused: true\n");
    let broken = tempfile::tempdir().unwrap();
    write_script(
        broken.path(),
        "bwrap",
        "#!/bin/sh\necho 'no namespaces here' >&2\nexit 1\n",
    );
    let mut sandbox = sandbox(SandboxMode::Required);
    sandbox.tool_dirs.insert(0, broken.path().into());
    let error = render_dir(
        repo.path(),
        &Renderer::Kustomize(KustomizeOptions {}),
        "chart",
        &sandbox,
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("kustomize: the render sandbox needs bubblewrap: "),
        "{error}"
    );
    assert!(error.contains("no namespaces here"), "{error}");
    assert!(error.contains("apt-get install bubblewrap"), "{error}");
    assert!(error.contains("--render-sandbox off"), "{error}");
}

/// A `kustomize` that renders a ConfigMap whatever it is given: a render
/// that fails therefore failed before kustomize ran.
fn obliging_kustomize() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_script(
        dir.path(),
        "kustomize",
        "#!/bin/sh\nprintf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: ran\\n'\n",
    );
    dir
}

fn kustomize_error(files: &[(&str, &str)], links: &[(&str, &str)]) -> String {
    let repo = tempfile::tempdir().unwrap();
    for (path, text) in files {
        write_file(repo.path(), path, text);
    }
    for (path, target) in links {
        symlink(repo.path(), path, target);
    }
    let kustomize = obliging_kustomize();
    let sandbox = Sandbox {
        tool_dirs: vec![kustomize.path().into()],
        ..sandbox(SandboxMode::Required)
    };
    let renderer = Renderer::Kustomize(KustomizeOptions {});
    match render_dir(repo.path(), &renderer, "apps/prod", &sandbox) {
        Ok(manifests) => format!("rendered {} objects", manifests.len()),
        Err(error) => error.to_string(),
    }
}

#[test]
fn kustomize_paths_that_leave_the_repository_are_refused() {
    let k = "apps/prod/kustomization.yaml";
    let cases: &[(&str, &str)] = &[
        (
            "resources: [cm.yaml, ../../../../etc]\n",
            "apps/prod/kustomization.yaml: resources[1]: ../../../../etc leaves the repository",
        ),
        (
            "resources: [/etc/kubernetes]\n",
            "apps/prod/kustomization.yaml: resources[0]: /etc/kubernetes leaves the repository",
        ),
        (
            "bases: [../../..]\n",
            "apps/prod/kustomization.yaml: bases[0]: ../../.. leaves the repository",
        ),
        (
            "components: [../../../x]\n",
            "apps/prod/kustomization.yaml: components[0]: ../../../x leaves the repository",
        ),
        (
            "patches:\n- path: ../../../etc/passwd\n",
            "apps/prod/kustomization.yaml: patches[0].path: ../../../etc/passwd leaves the repository",
        ),
        (
            "patchesStrategicMerge: [../../../root/.kube/config]\n",
            "apps/prod/kustomization.yaml: patchesStrategicMerge[0]: ../../../root/.kube/config leaves the repository",
        ),
        (
            "configMapGenerator:\n- name: x\n  files: [kc=../../../root/.kube/config]\n",
            "apps/prod/kustomization.yaml: configMapGenerator[0].files[0]: ../../../root/.kube/config leaves the repository",
        ),
        (
            "secretGenerator:\n- name: x\n  envs: [../../../etc/environment]\n",
            "apps/prod/kustomization.yaml: secretGenerator[0].envs[0]: ../../../etc/environment leaves the repository",
        ),
        // By its text `l/up/../../x` stays inside; `l/up` leads to the root.
        (
            "resources: [l/up/../../x]\n",
            "apps/prod/kustomization.yaml: resources[0]: l/up/../../x leaves the repository",
        ),
        // A base reached through resources is checked too.
        (
            "resources: [../base]\n",
            "apps/base/kustomization.yaml: resources[0]: ../../../etc leaves the repository",
        ),
    ];
    for (kustomization, expected) in cases {
        let error = kustomize_error(
            &[
                (k, kustomization),
                ("apps/prod/cm.yaml", "kind: ConfigMap\n"),
                (
                    "apps/base/kustomization.yaml",
                    "resources: [../../../etc]\n",
                ),
            ],
            &[("apps/prod/l/up", "../../..")],
        );
        assert_eq!(&error, expected, "{kustomization}");
    }
    // A kustomization too big to check is not handed to kustomize either.
    let aliases = "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n";
    let error = kustomize_error(
        &[(k, &format!("resources: [../../../../etc]\n{aliases}"))],
        &[],
    );
    assert!(
        error.starts_with("kustomize: apps/prod/kustomization.yaml:5: ")
            && error.contains("alias replay limit exceeded"),
        "{error}"
    );
    // Inside the repository, through links or not, it still runs.
    let fine = kustomize_error(
        &[
            (k, "resources: [cm.yaml, l/up/apps/prod/cm.yaml]\n"),
            ("apps/prod/cm.yaml", "kind: ConfigMap\n"),
        ],
        &[("apps/prod/l/up", "../../..")],
    );
    assert_eq!(fine, "rendered 1 objects");
}

#[test]
fn kustomize_file_and_remote_bases_are_refused() {
    let cases = [
        (
            "file:///etc/kubernetes",
            "is a file:// URL; name a path in the repository",
        ),
        (
            "https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.4.0",
            "is a remote base; only paths in the repository are allowed",
        ),
        (
            "github.com/example/shop/base?ref=v1",
            "is a remote base; only paths in the repository are allowed",
        ),
        (
            "git@github.com:example/shop.git",
            "is a remote base; only paths in the repository are allowed",
        ),
        (
            "ssh://git@example.com/shop.git//base",
            "is a remote base; only paths in the repository are allowed",
        ),
        (
            "example.com/shop/base",
            "is not a file or directory of the repository (remote bases are not fetched)",
        ),
    ];
    for (base, reason) in cases {
        for field in ["resources", "bases", "components"] {
            let error = kustomize_error(
                &[(
                    "apps/prod/kustomization.yaml",
                    &format!("{field}:\n- {base}\n"),
                )],
                &[],
            );
            assert_eq!(
                error,
                format!("apps/prod/kustomization.yaml: {field}[0]: {base} {reason}"),
            );
        }
    }
}

#[test]
fn a_jsonnet_memory_bomb_is_stopped_by_the_memory_limit() {
    let _one_at_a_time = MEMORY.lock().unwrap_or_else(|e| e.into_inner());
    let repo = tempfile::tempdir().unwrap();
    write_file(
        repo.path(),
        "main.jsonnet",
        "local x = std.foldl(function(a, b) a + [b], std.range(1, 20000000), []); x\n",
    );
    let before = reset_peak_rss();
    let started = Instant::now();
    let error = render_dir(
        repo.path(),
        &Renderer::Jsonnet(JsonnetOptions::default()),
        "",
        &sandbox(SandboxMode::Required),
    )
    .unwrap_err();
    let after = peak_rss_kb();
    println!(
        "jsonnet bomb: {:?}, test process peak RSS {before} kB -> {after} kB",
        started.elapsed()
    );
    assert_eq!(
        error.to_string(),
        "jsonnet: main.jsonnet: exceeded the memory limit of 1 GiB"
    );
    assert!(!error.is_retryable());
    assert!(after - before < 50 * 1024, "{before} kB -> {after} kB");
}

#[test]
fn a_jsonnet_loop_is_stopped_by_the_time_limit() {
    let repo = tempfile::tempdir().unwrap();
    // 2^40 calls, 40 deep: endless, in little memory.
    write_file(
        repo.path(),
        "apps/web/main.jsonnet",
        "local f(n) = if n == 0 then 0 else f(n - 1) + f(n - 1); f(40)\n",
    );
    let sandbox = Sandbox {
        timeout: Duration::from_secs(2),
        ..sandbox(SandboxMode::Required)
    };
    let started = Instant::now();
    let error = render_dir(
        repo.path(),
        &Renderer::Jsonnet(JsonnetOptions::default()),
        "apps/web",
        &sandbox,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "jsonnet: apps/web/main.jsonnet: timed out after 2s"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn jsonnet_renders_in_the_child_with_imports_ext_vars_and_errors() {
    let repo = tempfile::tempdir().unwrap();
    write_file(
        repo.path(),
        "lib/cm.libsonnet",
        "function(name) {apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: name}}",
    );
    write_file(
        repo.path(),
        "apps/web/main.jsonnet",
        "local cm = import '../../lib/cm.libsonnet'; [cm('a'), cm(std.extVar('env'))]",
    );
    write_file(repo.path(), "apps/bad/main.jsonnet", "{a: error 'broken'}");
    let options = JsonnetOptions {
        ext_vars: [("env".to_string(), "prod".to_string())].into(),
        ..Default::default()
    };
    for mode in [SandboxMode::Required, SandboxMode::Off] {
        let sandbox = sandbox(mode);
        let started = Instant::now();
        let manifests = render_dir(
            repo.path(),
            &Renderer::Jsonnet(options.clone()),
            "apps/web",
            &sandbox,
        )
        .unwrap();
        println!("jsonnet in the child ({mode}): {:?}", started.elapsed());
        let names: Vec<String> = manifests.iter().map(|m| m.id.to_string()).collect();
        assert_eq!(names, vec!["ConfigMap a", "ConfigMap prod"]);
        assert_eq!(
            manifests[1].origin.to_string(),
            "apps/web/main.jsonnet (document 2)"
        );
        let error = render_dir(
            repo.path(),
            &Renderer::Jsonnet(JsonnetOptions::default()),
            "apps/bad",
            &sandbox,
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("jsonnet: apps/bad/main.jsonnet: ") && error.contains("broken"),
            "{error}"
        );
    }
}

#[test]
fn forty_documents_of_aliases_share_one_budget() {
    let _one_at_a_time = MEMORY.lock().unwrap_or_else(|e| e.into_inner());
    let repo = tempfile::tempdir().unwrap();
    let bomb = alias_bomb(40);
    assert!(bomb.len() < 12 * 1024, "{} bytes", bomb.len());
    write_file(repo.path(), "bomb.yaml", &bomb);
    let before = reset_peak_rss();
    let error = render_plain(repo.path()).unwrap_err().to_string();
    let after = peak_rss_kb();
    println!("alias bomb: test process peak RSS {before} kB -> {after} kB");
    // The first document fits; the second, which alone would, does not.
    assert_eq!(
        error,
        "bomb.yaml:17: YAML aliases expand to more than 200000 nodes (the limit for all the files of one source)"
    );
    assert!(after - before < 150 * 1024, "{before} kB -> {after} kB");
    // The budget is the render's, not the file's: two files of one
    // document each do not fit either.
    write_file(repo.path(), "bomb.yaml", &alias_document(0));
    write_file(repo.path(), "bomb2.yaml", &alias_document(1));
    let error = render_plain(repo.path()).unwrap_err().to_string();
    assert!(
        error.starts_with("bomb2.yaml:8: YAML aliases expand"),
        "{error}"
    );
    std::fs::remove_file(repo.path().join("bomb2.yaml")).unwrap();
    let one = render_plain(repo.path());
    assert_eq!(one.unwrap().len(), 1);
}

#[test]
fn a_fifty_megabyte_file_is_refused_before_parsing() {
    let _one_at_a_time = MEMORY.lock().unwrap_or_else(|e| e.into_inner());
    let repo = tempfile::tempdir().unwrap();
    let mut text = String::from("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n");
    let mut index = 0;
    while text.len() < 50 * 1024 * 1024 {
        text.push_str(&format!(
            "  k{index}: [a, b, c, d, e, f, g, h, i, j, k, l, m]\n"
        ));
        index += 1;
    }
    text.truncate(50 * 1024 * 1024);
    write_file(repo.path(), "big.yaml", &text);
    drop(text);
    let files = Files::read_dir(repo.path()).unwrap();
    let before = reset_peak_rss();
    let started = Instant::now();
    let error = render(
        &Renderer::default(),
        &files,
        "",
        &sandbox(SandboxMode::Required),
        &Default::default(),
    )
    .unwrap_err()
    .to_string();
    let after = peak_rss_kb();
    println!(
        "50 MiB file: refused in {:?}, peak RSS {before} kB -> {after} kB",
        started.elapsed()
    );
    assert_eq!(
        error,
        "big.yaml: is 50 MiB, more than the limit of 16 MiB for one file (not parsed)"
    );
    assert!(after - before < 10 * 1024, "{before} kB -> {after} kB");
}

#[test]
fn too_many_objects_are_refused() {
    let repo = tempfile::tempdir().unwrap();
    let cm =
        |name: String| format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\n");
    let many: Vec<String> = (0..6000).map(|i| cm(format!("a{i}"))).collect();
    write_file(repo.path(), "a.yaml", &many.join("---\n"));
    let items: Vec<serde_json::Value> = (0..4001)
        .map(|i| serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("b{i}")}}))
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    write_file(repo.path(), "b/list.json", &list.to_string());
    let error = render_dir(
        repo.path(),
        &Renderer::Directory(DirectoryOptions::default()),
        "",
        &sandbox(SandboxMode::Required),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        error,
        "b/list.json:1: the source renders more than 10000 objects (the limit per source)"
    );
    let limits = Limits {
        max_objects: 3,
        ..Limits::default()
    };
    std::fs::remove_dir_all(repo.path().join("b")).unwrap();
    write_file(
        repo.path(),
        "a.yaml",
        &format!("{}---\n{}", cm("x".into()), cm("y".into())),
    );
    write_file(
        repo.path(),
        "c.yaml",
        &format!("{}---\n{}", cm("z".into()), cm("w".into())),
    );
    let small = Sandbox {
        limits,
        ..sandbox(SandboxMode::Required)
    };
    let error = render_dir(repo.path(), &Renderer::default(), "", &small)
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "c.yaml:5: the source renders more than 3 objects (the limit per source)"
    );
}
