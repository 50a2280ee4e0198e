//! The Helm chart (`deploy/chart`) and the kustomization
//! (`deploy/manifests`) install exactly what `tether install` installs:
//! the same objects, compared field by field, for each set of values and
//! the flags they mirror; the generated files are what `tether install`
//! prints now; and what they render passes a server-side dry run.
//!
//! The chart leaves out one object by default: the release namespace
//! (`createNamespace: false`), which `helm install --create-namespace`
//! creates and a cluster administrator labels.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::core::v1::Namespace;
use serde_json::{Value, json};
use tether_testkit::{TestNamespace, eventually, repo_root, run_ok, run_with_stdin};

/// The image `deploy/manifests` is generated with and the chart defaults to.
fn default_image() -> String {
    format!("ghcr.io/tether-dev/tether:{}", env!("CARGO_PKG_VERSION"))
}

fn chart() -> PathBuf {
    repo_root().join("deploy/chart")
}

fn kustomization() -> PathBuf {
    repo_root().join("deploy/manifests")
}

/// One set of chart values and the `tether install` flags they mirror.
struct Case {
    name: &'static str,
    /// `helm template` arguments (`--set …`).
    values: Vec<String>,
    /// `tether install` flags.
    flags: Vec<String>,
    /// Whether the chart renders the namespace (`createNamespace`).
    namespace_rendered: bool,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

/// The value sets, for a controller in `namespace` that reads Secrets in
/// `shop` and `web` too.
fn cases(namespace: &str, shop: &str, web: &str) -> Vec<Case> {
    let image = default_image();
    vec![
        // In tether-system: deploy/manifests/install.yaml but the namespace.
        Case {
            name: "the defaults",
            values: vec![],
            flags: strings(&["--image", &image]),
            namespace_rendered: false,
        },
        Case {
            name: "another image, three replicas, two secrets namespaces, two tenant namespaces and the lockdown",
            values: vec![
                "--set".into(),
                "image.repository=registry.example.com/tether,image.tag=0.2,replicas=3".into(),
                // The controller's own namespace is skipped, a repeat kept
                // in the arguments, as `tether install` does.
                "--set-json".into(),
                format!(r#"secretsNamespaces=["{shop}","{namespace}","{web}","{shop}"]"#),
                "--set-json".into(),
                format!(r#"tenantNamespaces=["{web}","{shop}","{web}"]"#),
                "--set".into(),
                "defaultServiceAccount=deployer,requireServiceAccount=true".into(),
            ],
            flags: strings(&[
                "--image",
                "registry.example.com/tether:0.2",
                "--replicas",
                "3",
                "--secrets-namespace",
                shop,
                "--secrets-namespace",
                namespace,
                "--secrets-namespace",
                web,
                "--secrets-namespace",
                shop,
                "--tenant-namespace",
                web,
                "--tenant-namespace",
                shop,
                "--tenant-namespace",
                web,
                "--default-service-account",
                "deployer",
                "--require-service-account",
            ]),
            namespace_rendered: false,
        },
        Case {
            name: "the single-writer policy with writers, namespaces, a group and a cap",
            values: vec![
                "--set".into(),
                "enforceSingleWriter=true,breakGlassGroup=oncall,maxBreakGlassTTL=1d2h90m5s".into(),
                "--set-json".into(),
                r#"writers=["alice","ci <bot> & \"co\""]"#.into(),
                "--set-json".into(),
                format!(r#"enforceNamespaces=["{shop}","{web}"]"#),
            ],
            flags: strings(&[
                "--image",
                &image,
                "--enforce-single-writer",
                "--writer",
                "alice",
                "--writer",
                r#"ci <bot> & "co""#,
                "--enforce-namespace",
                shop,
                "--enforce-namespace",
                web,
                "--break-glass-group",
                "oncall",
                "--max-break-glass-ttl",
                "1d2h90m5s",
            ]),
            namespace_rendered: false,
        },
        Case {
            name: "no image: no Deployment, for a tether run elsewhere",
            values: strings(&["--set", "image.repository="]),
            flags: vec![],
            namespace_rendered: false,
        },
        Case {
            name: "an image by digest, and the namespace rendered",
            values: strings(&[
                "--set",
                "image.digest=sha256:0123456789abcdef,createNamespace=true",
            ]),
            flags: strings(&[
                "--image",
                "ghcr.io/tether-dev/tether@sha256:0123456789abcdef",
            ]),
            namespace_rendered: true,
        },
    ]
}

/// `helm template` of the chart, CRDs included, for a release in `namespace`.
fn helm_template(namespace: &str, values: &[String]) -> String {
    run_ok(
        Command::new("helm")
            .args(["template", "tether"])
            .arg(chart())
            .args(["--include-crds", "--namespace", namespace])
            .args(values),
    )
}

/// `tether install --namespace NAMESPACE FLAGS --dry-run -o yaml`.
fn tether_install(namespace: &str, flags: &[String]) -> String {
    run_ok(
        Command::new(env!("CARGO_BIN_EXE_tether"))
            .args([
                "install",
                "--namespace",
                namespace,
                "--dry-run",
                "-o",
                "yaml",
            ])
            .args(flags),
    )
}

/// `kubectl kustomize deploy/manifests`.
fn kustomize() -> String {
    run_ok(
        Command::new("kubectl")
            .arg("kustomize")
            .arg(kustomization()),
    )
}

/// The objects of a YAML stream read as kubectl reads it, keyed by
/// `apiVersion kind namespace/name`. A repeated object must be the same.
fn objects(origin: &str, yaml: &str) -> BTreeMap<String, Value> {
    let parsed = tether_source::manifest::parse_file(Path::new(origin), yaml.as_bytes())
        .unwrap_or_else(|error| panic!("{origin}: {error}"));
    let mut objects = BTreeMap::new();
    for (at, object) in parsed {
        let metadata = &object["metadata"];
        let name = metadata["name"].as_str().unwrap_or("?");
        let key = format!(
            "{} {} {}",
            object["apiVersion"].as_str().unwrap_or("?"),
            object["kind"].as_str().unwrap_or("?"),
            match metadata["namespace"].as_str() {
                Some(namespace) => format!("{namespace}/{name}"),
                None => name.to_string(),
            }
        );
        if let Some(before) = objects.insert(key.clone(), object.clone()) {
            assert_eq!(before, object, "{at}: {key} twice, different");
        }
    }
    objects
}

/// `value` in JSON, from `skip` characters on, at most 100 of them.
fn excerpt(value: Option<&Value>, skip: usize) -> String {
    let Some(value) = value else {
        return "nothing".into();
    };
    let text = value.to_string();
    let start = if skip > 0 { "…" } else { "" };
    let rest: String = text.chars().skip(skip).collect();
    match rest.char_indices().nth(100) {
        Some((cut, _)) => format!("{start}{}…", &rest[..cut]),
        None => format!("{start}{rest}"),
    }
}

/// Two differing values, long strings from a little before their first
/// difference.
fn versus(ours: Option<&Value>, theirs: Option<&Value>) -> String {
    let same = match (ours, theirs) {
        (Some(Value::String(a)), Some(Value::String(b))) => {
            a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
        }
        _ => 0,
    };
    let skip = same.saturating_sub(30);
    format!("{} ≠ {}", excerpt(ours, skip), excerpt(theirs, skip))
}

/// The field paths where `theirs` differs from `ours`.
fn differences(path: &str, ours: Option<&Value>, theirs: Option<&Value>, found: &mut Vec<String>) {
    match (ours, theirs) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            for key in a.keys().chain(b.keys()).collect::<BTreeSet<_>>() {
                differences(&format!("{path}.{key}"), a.get(key), b.get(key), found);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(&format!("{path}[{i}]"), Some(x), Some(y), found);
            }
        }
        // The same number, written 255.0 by tether install and 255 by kustomize.
        (Some(Value::Number(a)), Some(Value::Number(b))) if a.as_f64() == b.as_f64() => {}
        (a, b) if a != b => found.push(format!("{path}: {}", versus(a, b))),
        _ => {}
    }
}

/// Panics with every object and field where `theirs` (named `what`)
/// differs from `ours` (`tether install`'s).
fn assert_same_objects(
    what: &str,
    ours: &BTreeMap<String, Value>,
    theirs: &BTreeMap<String, Value>,
) {
    let mut found = Vec::new();
    for key in ours.keys().chain(theirs.keys()).collect::<BTreeSet<_>>() {
        match (ours.get(key), theirs.get(key)) {
            (Some(_), None) => found.push(format!("{key}: only from tether install")),
            (None, Some(_)) => found.push(format!("{key}: only from {what}")),
            (a, b) => {
                let mut fields = Vec::new();
                differences("", a, b, &mut fields);
                found.extend(fields.iter().map(|field| format!("{key}: {field}")));
            }
        }
    }
    assert!(
        found.is_empty(),
        "{what} differs from tether install (per field: tether install's value ≠ theirs):\n{}",
        found.join("\n")
    );
}

fn without_namespace(mut objects: BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    objects.retain(|_, object| object["kind"] != "Namespace");
    objects
}

#[test]
fn the_chart_renders_what_tether_install_installs_for_each_set_of_values() {
    for namespace in ["tether-system", "ops"] {
        for case in cases(namespace, "shop", "web") {
            let ours = objects("tether install", &tether_install(namespace, &case.flags));
            let ours = match case.namespace_rendered {
                true => ours,
                false => without_namespace(ours),
            };
            let theirs = objects("helm template", &helm_template(namespace, &case.values));
            assert_same_objects(
                &format!("the chart ({}, in {namespace})", case.name),
                &ours,
                &theirs,
            );
        }
    }
}

#[test]
fn the_chart_lints_and_carries_the_workspace_version() {
    run_ok(Command::new("helm").arg("lint").arg(chart()));
    let text = std::fs::read_to_string(chart().join("Chart.yaml")).unwrap();
    let meta: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(meta["name"], "tether");
    assert_eq!(meta["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(meta["appVersion"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn the_chart_refuses_values_tether_install_refuses() {
    for (values, refusal) in [
        ("maxBreakGlassTTL=90", "expected a time like"),
        ("maxBreakGlassTTL=0h", "must be longer than zero"),
        ("maxBreakGlassTTL=2w", "expected a time like"),
    ] {
        let output = Command::new("helm")
            .args(["template", "tether"])
            .arg(chart())
            .args(["--set-string", values])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && said.contains(refusal),
            "{values}: {said}"
        );
    }
    let output = Command::new("helm")
        .args(["template", "tether"])
        .arg(chart())
        .args(["--set-json", r#"writers=["alice"]"#])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("only with enforceSingleWriter: true"),
        "{said}"
    );
}

/// The line where `file` first differs from `expected`, for the message.
fn first_difference(file: &str, expected: &str) -> String {
    let line = file
        .lines()
        .zip(expected.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(file.lines().count().min(expected.lines().count()));
    format!("line {}", line + 1)
}

#[test]
fn the_generated_files_are_what_tether_install_prints_and_kustomize_renders_the_same_objects() {
    let root = repo_root();
    let install = tether_install("tether-system", &strings(&["--image", &default_image()]));
    let file = std::fs::read_to_string(root.join("deploy/manifests/install.yaml")).unwrap();
    assert!(
        file == install,
        "deploy/manifests/install.yaml is stale from {}: run scripts/gen-manifests.sh",
        first_difference(&file, &install)
    );
    let crds = run_ok(Command::new(env!("CARGO_BIN_EXE_tether")).args([
        "install",
        "--crds-only",
        "--dry-run",
        "-o",
        "yaml",
    ]));
    let file = std::fs::read_to_string(chart().join("crds/tether.yaml")).unwrap();
    assert!(
        file == crds,
        "deploy/chart/crds/tether.yaml is stale from {}: run scripts/gen-manifests.sh",
        first_difference(&file, &crds)
    );

    let ours = objects("tether install", &install);
    assert_same_objects(
        "kubectl kustomize",
        &ours,
        &objects("kubectl kustomize", &kustomize()),
    );
}

/// Held by the tests that reach the control plane: a Helm release owns
/// cluster-wide objects (ClusterRoles, policies, CRDs) and its uninstall
/// deletes them, which a dry run beside it would find half gone.
static CLUSTER_WIDE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `kubectl apply --dry-run=server ARGS -f -` of `yaml` (its objects name
/// their namespaces), which must pass.
fn server_dry_run(ns: &TestNamespace, what: &str, args: &[&str], yaml: &str) {
    let mut kubectl = Command::new("kubectl");
    kubectl
        .arg("--kubeconfig")
        .arg(&ns.kubeconfig)
        .args(["apply", "--dry-run=server"])
        .args(args)
        .args(["-f", "-"]);
    let output = run_with_stdin(&mut kubectl, yaml);
    assert!(
        output.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The namespaces exist for real (a namespaced object's dry run needs its
/// namespace); nothing else is created. The objects use no custom
/// resource, so the CRDs need not be established first.
#[tokio::test]
async fn what_the_chart_and_the_kustomization_render_passes_a_server_side_dry_run() {
    let _alone = CLUSTER_WIDE.lock().await;
    let ns = TestNamespace::create("chart").await;
    let shop = TestNamespace::create("chart-shop").await;
    let web = TestNamespace::create("chart-web").await;
    for case in cases(&ns.name, &shop.name, &web.name) {
        let yaml = helm_template(&ns.name, &case.values);
        server_dry_run(&ns, case.name, &[], &yaml);
    }

    // The kustomization installs into tether-system: created first, as
    // the Namespace it renders (labelled), then the rest with server-side
    // apply as the README says.
    let rendered = kustomize();
    let namespace = objects("kubectl kustomize", &rendered)
        .into_values()
        .find(|object| object["kind"] == "Namespace")
        .expect("the kustomization renders the namespace");
    assert_eq!(namespace["metadata"]["name"], "tether-system");
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &namespace.to_string());
    server_dry_run(&ns, "kubectl kustomize", &["--server-side"], &rendered);
    // Nothing but the namespace was created.
    let accounts = ns.kubectl(&[
        "get",
        "serviceaccount",
        "tether-controller",
        "-n",
        "tether-system",
    ]);
    assert!(!accounts.status.success());
}

/// `helm ARGS` against the test's control plane.
fn helm(ns: &TestNamespace, args: &[&str]) -> String {
    run_ok(
        Command::new("helm")
            .arg("--kubeconfig")
            .arg(&ns.kubeconfig)
            .args(args),
    )
}

/// Tries to create a break-glass audit record in `ns` as the controller's
/// service account; whether the API server admitted it.
fn audit_record_admitted(ns: &TestNamespace, name: &str) -> bool {
    let record = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"tether.dev/break-glass-uid": "0000"}}});
    let controller = format!("--as=system:serviceaccount:{}:tether-controller", ns.name);
    let output = ns.kubectl_with_stdin(&["create", &controller, "-f", "-"], &record.to_string());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() || said.contains("tether-audit-records"),
        "{said}"
    );
    output.status.success()
}

/// A real `helm install --create-namespace`: the release owns the
/// cluster-wide objects too, so this needs the test process's own control
/// plane (no `tether install` there).
#[tokio::test]
async fn helm_install_works_and_the_label_it_asks_for_lets_the_controller_write_audit_records() {
    let _alone = CLUSTER_WIDE.lock().await;
    let ns = TestNamespace::create("helm-install").await;
    let chart = chart();
    let installed = helm(
        &ns,
        &[
            "install",
            "tether",
            chart.to_str().unwrap(),
            "--namespace",
            &ns.name,
            "--create-namespace",
            "--set",
            "image.repository=",
        ],
    );
    let label = format!(
        "kubectl label namespace {} tether.dev/controller-namespace=true",
        ns.name
    );
    assert!(installed.contains(&label), "{installed}");

    // Unlabelled, the namespace is not the controller's: refused (once the
    // new policy is in force).
    let mut attempt = 0;
    eventually("the audit-records policy to refuse records", || {
        attempt += 1;
        let admitted = audit_record_admitted(&ns, &format!("early-{attempt}"));
        async move { (!admitted).then_some(()) }
    })
    .await;
    ns.kubectl_ok(&[
        "label",
        "namespace",
        &ns.name,
        "tether.dev/controller-namespace=true",
    ]);
    eventually("the labelled namespace to take audit records", || {
        attempt += 1;
        let admitted = audit_record_admitted(&ns, &format!("record-{attempt}"));
        async move { admitted.then_some(()) }
    })
    .await;

    // Uninstalled: the namespace (with its records) and the CRDs stay.
    helm(&ns, &["uninstall", "tether", "--namespace", &ns.name]);
    let namespace: Namespace = kube::Api::all(ns.client.clone())
        .get(&ns.name)
        .await
        .unwrap();
    assert!(namespace.metadata.deletion_timestamp.is_none());
    ns.kubectl_ok(&[
        "get",
        "crd",
        "applications.tether.dev",
        "breakglasses.tether.dev",
    ]);
    assert!(
        !ns.kubectl(&["get", "serviceaccount", "tether-controller"])
            .status
            .success()
    );
}
