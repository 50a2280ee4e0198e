//! `tether adopt` against real repositories (`git` CLI, file:// remotes),
//! `kubectl kustomize` and `helm template`.

mod common;

use std::path::{Path, PathBuf};

use common::chart;
use serde_json::{Value, json};
use tether_core::ObjectRef;
use tether_source::adopt::{AdoptError, Adopted, AdoptedField, Adoption, Author, Request, adopt};
use tether_source::render::Sandbox;
use tether_source::spec::{HelmOptions, KustomizeOptions, Renderer};
use tether_source::{Source, render_local};
use tether_testkit::tools::helm_dir;
use tether_testkit::{Repo, git, run_ok, write_script};

const DEPLOYMENT: &str = "# The web frontend.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  # INC-1234 scaled this by hand.
  replicas: 2
  template:
    spec:
      containers:
      - name: app
        image: web:1.0   # pinned
";

const SETTINGS: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  # read at start-up
  LOG_LEVEL: info
  MODE: fast
";

fn object(group: &str, kind: &str, name: &str) -> ObjectRef {
    ObjectRef {
        group: group.into(),
        kind: kind.into(),
        namespace: Some("shop".into()),
        name: name.into(),
    }
}

fn field(path: &str, desired: Value, live: Value) -> AdoptedField {
    AdoptedField {
        path: path.into(),
        desired: Some(desired),
        live: Some(live),
    }
}

/// What adopting `fields` of `object` asks for.
fn one_object(object: ObjectRef, fields: Vec<AdoptedField>) -> Vec<Adoption> {
    vec![Adoption { object, fields }]
}

fn drift() -> Vec<Adoption> {
    vec![
        Adoption {
            object: object("apps", "Deployment", "web"),
            fields: vec![
                field("spec.replicas", json!(2), json!(5)),
                field(
                    "spec.template.spec.containers[name=app].image",
                    json!("web:1.0"),
                    json!("web:1.0-hotfix"),
                ),
            ],
        },
        Adoption {
            object: object("", "ConfigMap", "settings"),
            fields: vec![field("data.LOG_LEVEL", json!("info"), json!("debug"))],
        },
    ]
}

fn shop_repo() -> (Repo, String) {
    let repo = Repo::new();
    repo.write("shop/web.yaml", DEPLOYMENT)
        .write("shop/settings.yaml", SETTINGS)
        .write("README.md", "shop\n");
    repo.commit_all("shop");
    let url = repo.file_url("shop");
    (repo, url)
}

/// The `shop/` directory of the repository at `url`, on its default branch.
fn shop_source(url: &str) -> Source {
    Source {
        repo_url: url.to_string(),
        path: "shop".into(),
        ..Default::default()
    }
}

/// The commit `main` of the published repository at `url`.
fn main_of(url: &str) -> String {
    git(&bare(url), &["rev-parse", "main"])
}

fn author() -> Author {
    "Ada Lovelace <ada@example.com>".parse().unwrap()
}

fn run(source: &Source, objects: &[Adoption], branch: Option<&str>) -> Result<Adopted, AdoptError> {
    adopt(&Request {
        source,
        default_namespace: "shop",
        objects,
        reason: "INC-1234: checkout latency",
        author: &author(),
        branch,
        credentials: None,
        sandbox: &Sandbox::default(),
    })
}

fn bare(url: &str) -> PathBuf {
    PathBuf::from(url.strip_prefix("file://").unwrap())
}

/// The `-`/`+` lines of a commit's diff, without file headers.
fn changed_lines(repo: &Path, commit: &str) -> Vec<String> {
    git(
        repo,
        &["diff", "--unified=0", &format!("{commit}~1"), commit],
    )
    .lines()
    .filter(|l| {
        (l.starts_with('-') || l.starts_with('+')) && !l.starts_with("---") && !l.starts_with("+++")
    })
    .map(str::to_string)
    .collect()
}

#[test]
fn adopting_makes_one_commit_whose_diff_is_exactly_the_adopted_fields() {
    let (_repo, url) = shop_repo();
    let source = Source {
        repo_url: url.clone(),
        revision: "main".into(),
        path: "shop".into(),
        ..Default::default()
    };
    let before = main_of(&url);
    let adopted = run(&source, &drift(), None).unwrap();
    assert_eq!(adopted.branch, "main");
    assert_eq!(adopted.files, vec!["shop/settings.yaml", "shop/web.yaml"]);
    let remote = bare(&url);
    assert_eq!(git(&remote, &["rev-parse", "main"]), adopted.commit);
    assert_eq!(git(&remote, &["rev-parse", "main~1"]), before);
    assert_eq!(
        changed_lines(&remote, &adopted.commit),
        vec![
            "-  LOG_LEVEL: info",
            "+  LOG_LEVEL: debug",
            "-  replicas: 2",
            "+  replicas: 5",
            "-        image: web:1.0   # pinned",
            "+        image: web:1.0-hotfix   # pinned",
        ]
    );
    assert_eq!(
        git(
            &remote,
            &["log", "-1", "--format=%an <%ae>|%cn <%ce>", "main"]
        ),
        "Ada Lovelace <ada@example.com>|Ada Lovelace <ada@example.com>"
    );
    let message = git(&remote, &["log", "-1", "--format=%B", "main"]);
    assert!(
        message.starts_with("Adopt live changes: INC-1234: checkout latency\n"),
        "{message}"
    );
    assert!(
        message.contains("- Deployment shop/web: spec.replicas 2 → 5\n"),
        "{message}"
    );
    assert!(
        message.contains("- ConfigMap shop/settings: data.LOG_LEVEL info → debug"),
        "{message}"
    );
}

#[test]
fn adopting_onto_a_new_branch_leaves_the_tracked_branch_alone() {
    let (_repo, url) = shop_repo();
    let source = shop_source(&url);
    let main = main_of(&url);
    let adopted = run(&source, &drift(), Some("adopt/inc-1234")).unwrap();
    assert_eq!(adopted.branch, "adopt/inc-1234");
    let remote = bare(&url);
    assert_eq!(git(&remote, &["rev-parse", "main"]), main);
    assert_eq!(
        git(&remote, &["rev-parse", "adopt/inc-1234"]),
        adopted.commit
    );
    assert_eq!(git(&remote, &["rev-parse", "adopt/inc-1234~1"]), main);
}

#[test]
fn a_refused_push_keeps_the_commit_and_says_where_and_why() {
    let (_repo, url) = shop_repo();
    write_script(
        &bare(&url),
        "hooks/pre-receive",
        "#!/bin/sh\necho 'protected branch: open a pull request' >&2\nexit 1\n",
    );
    let source = shop_source(&url);
    let before = main_of(&url);
    let error = run(&source, &drift(), None).unwrap_err();
    let AdoptError::PushRefused {
        commit,
        branch,
        dir,
        message,
    } = &error
    else {
        panic!("{error}")
    };
    assert_eq!(branch, "main");
    assert!(message.contains("protected branch"), "{message}");
    assert_eq!(git(dir, &["rev-parse", "HEAD"]), *commit);
    assert!(
        error.to_string().contains(&dir.display().to_string()),
        "{error}"
    );
    assert_eq!(main_of(&url), before);
    std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[test]
fn adopting_nothing_is_an_error_and_writes_nothing() {
    let (_repo, url) = shop_repo();
    let source = shop_source(&url);
    let before = main_of(&url);
    let empty = one_object(object("apps", "Deployment", "web"), Vec::new());
    for objects in [Vec::new(), empty] {
        let error = run(&source, &objects, None).unwrap_err();
        assert!(matches!(error, AdoptError::NoDrift), "{error}");
    }
    assert_eq!(main_of(&url), before);
}

#[test]
fn an_object_no_file_declares_is_an_error_that_names_it() {
    let (_repo, url) = shop_repo();
    let source = shop_source(&url);
    let before = main_of(&url);
    let objects = one_object(
        object("apps", "Deployment", "api"),
        vec![field("spec.replicas", json!(1), json!(2))],
    );
    let error = run(&source, &objects, None).unwrap_err().to_string();
    assert_eq!(
        error,
        "Deployment shop/api: not declared in any manifest of \"shop\""
    );
    assert_eq!(main_of(&url), before);
}

#[test]
fn sources_pinned_to_a_commit_a_range_or_a_tag_cannot_be_written() {
    let (repo, url) = shop_repo();
    git(&repo.dir, &["tag", "v1.0.0"]);
    repo.publish("shop");
    let sha = main_of(&url);
    for (revision, expected) in [
        (sha.as_str(), "is an exact commit"),
        (">=1.0.0 <2.0.0", "is a semver range"),
        ("v1.0.0", "is a tag, not a branch"),
    ] {
        let source = Source {
            repo_url: url.clone(),
            revision: revision.into(),
            path: "shop".into(),
            ..Default::default()
        };
        let error = run(&source, &drift(), None).unwrap_err().to_string();
        assert!(
            error.starts_with("the source cannot be written: "),
            "{error}"
        );
        assert!(error.contains(expected), "{error}");
    }
    assert_eq!(main_of(&url), sha);
}

#[test]
fn secret_values_are_never_adopted_nor_printed() {
    let (_repo, url) = shop_repo();
    let source = shop_source(&url);
    let objects = one_object(
        object("", "Secret", "db"),
        vec![field("data.password", json!("b2xk"), json!("c2VjcmV0"))],
    );
    let error = run(&source, &objects, None).unwrap_err().to_string();
    assert!(
        error.starts_with("Secret shop/db: data.password: Secret values are never written to Git"),
        "{error}"
    );
    assert!(
        !error.contains("c2VjcmV0") && !error.contains("b2xk"),
        "{error}"
    );
}

#[test]
fn jsonnet_output_has_no_file_to_edit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("main.jsonnet"),
        "{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'settings', namespace: 'shop'}, data: {LOG_LEVEL: 'info'}}",
    )
    .unwrap();
    let source = Source {
        renderer: Renderer::Jsonnet(Default::default()),
        ..Default::default()
    };
    let objects = one_object(
        object("", "ConfigMap", "settings"),
        vec![field("data.LOG_LEVEL", json!("info"), json!("debug"))],
    );
    let error =
        tether_source::adopt::write(dir.path(), &source, "shop", &objects, &Sandbox::default())
            .unwrap_err()
            .to_string();
    assert_eq!(
        error,
        "ConfigMap shop/settings: rendered by jsonnet, whose output has no file to edit"
    );
}

#[test]
fn a_kustomize_patch_renders_to_the_live_values() {
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("overlay");
    std::fs::create_dir_all(&app).unwrap();
    let web = DEPLOYMENT.replace(
        "        image: web:1.0   # pinned\n",
        "        image: web:1.0   # pinned\n      - name: side\n        image: side:1\n",
    );
    std::fs::write(app.join("web.yaml"), web).unwrap();
    let kustomization =
        "# Shop overlay.\nnamespace: shop  # every object\nresources:\n- web.yaml\n";
    std::fs::write(app.join("kustomization.yaml"), kustomization).unwrap();
    let source = Source {
        path: "overlay".into(),
        renderer: Renderer::Kustomize(KustomizeOptions::default()),
        ..Default::default()
    };
    let objects = drift()[..1].to_vec();
    let files =
        tether_source::adopt::write(dir.path(), &source, "shop", &objects, &Sandbox::default())
            .unwrap();
    assert_eq!(
        files,
        vec![
            "overlay/kustomization.yaml",
            "overlay/tether-adopt-deployment-web.yaml"
        ]
    );
    let written = std::fs::read_to_string(app.join("kustomization.yaml")).unwrap();
    assert_eq!(
        written,
        format!(
            "{kustomization}patches:\n  - path: tether-adopt-deployment-web.yaml\n    target:\n      group: apps\n      kind: Deployment\n      name: web\n"
        )
    );
    let patch = std::fs::read_to_string(app.join("tether-adopt-deployment-web.yaml")).unwrap();
    assert!(patch.contains("replicas: 5"), "{patch}");
    assert!(!patch.contains("side"), "{patch}");
    // kubectl kustomize (kustomize built into kubectl) renders the live values.
    let rendered = run_ok(
        std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(&app),
    );
    let deployment: Value = serde_saphyr::from_str(&rendered).unwrap();
    assert_eq!(deployment["metadata"]["namespace"], "shop");
    assert_eq!(deployment["spec"]["replicas"], 5);
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    let image =
        |name: &str| containers.iter().find(|c| c["name"] == name).unwrap()["image"].clone();
    assert_eq!(image("app"), "web:1.0-hotfix");
    assert_eq!(image("side"), "side:1");
    // A second adoption keeps the first one's fields.
    let again = one_object(
        object("apps", "Deployment", "web"),
        vec![field(
            "spec.template.spec.containers[name=side].image",
            json!("side:1"),
            json!("side:2"),
        )],
    );
    tether_source::adopt::write(dir.path(), &source, "shop", &again, &Sandbox::default()).unwrap();
    let rendered = render_local(
        &app,
        &source.renderer,
        &Sandbox::default(),
        &Default::default(),
    )
    .unwrap();
    let object = &rendered.manifests[0].object;
    assert_eq!(object["spec"]["replicas"], 5);
    assert_eq!(
        object["spec"]["template"]["spec"]["containers"][1]["image"],
        "side:2"
    );
    assert_eq!(
        std::fs::read_to_string(app.join("kustomization.yaml")).unwrap(),
        written
    );
}

#[test]
fn a_helm_field_that_maps_to_a_value_is_adopted_as_a_values_override_and_others_are_explained() {
    let Some(helm) = helm_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Replicas 1 by default, 2 (commented) in prod.yaml.
    let chart = chart("web-deployment", dir.path());
    let source = Source {
        path: "chart".into(),
        renderer: Renderer::Helm(HelmOptions {
            namespace: "shop".into(),
            value_files: vec!["prod.yaml".into()],
            ..Default::default()
        }),
        ..Default::default()
    };
    let sandbox = Sandbox {
        tool_dirs: vec![helm],
        ..Sandbox::default()
    };
    let objects = one_object(
        object("apps", "Deployment", "web"),
        vec![field("spec.replicas", json!(2), json!(4))],
    );
    let files =
        tether_source::adopt::write(dir.path(), &source, "shop", &objects, &sandbox).unwrap();
    assert_eq!(files, vec!["chart/prod.yaml"]);
    assert_eq!(
        std::fs::read_to_string(chart.join("prod.yaml")).unwrap(),
        "# Production.\nreplicas: 4  # two zones\n"
    );
    let unmappable = one_object(
        object("apps", "Deployment", "web"),
        vec![field("metadata.labels.tier", json!("front"), json!("back"))],
    );
    let error = tether_source::adopt::write(dir.path(), &source, "shop", &unmappable, &sandbox)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(
            "Deployment shop/web: metadata.labels.tier: cannot be adopted automatically: "
        ),
        "{error}"
    );
    assert!(error.contains("labels:\n      tier: back"), "{error}");
    assert_eq!(
        std::fs::read_to_string(chart.join("prod.yaml")).unwrap(),
        "# Production.\nreplicas: 4  # two zones\n"
    );
}
