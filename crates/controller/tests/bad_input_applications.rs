//! A sample of the bad-input corpus (`tests/bad-input/`) through a real
//! controller, on one control plane: bad apps next to a good one each get a
//! condition naming the file, object or field, nothing of them is applied,
//! the good app keeps syncing and the controller's memory stays small; and
//! the Application and BreakGlass specs of the corpus are refused by the
//! API server (`kubectl create`) naming the field.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject};
use serde::Deserialize;
use serde_json::{Value, json};
use support::{Repo, app, greeting_is, start_controller};
use tether_controller::api::Application;
use tether_testkit::{TestNamespace, eventually};

/// Resident memory of this process (the controller runs in it), in MB.
fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kb: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb / 1024.0
}

fn config_map(name: &str, extra: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n{extra}")
}

/// The message of `name`'s failed `Reconciled` condition, once there is
/// one. Read untyped: an Application whose spec does not decode is the
/// point of some cases.
async fn failure(ns: &TestNamespace, name: &str) -> String {
    let resource = ApiResource::erase::<Application>(&());
    let apps: Api<DynamicObject> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    eventually(&format!("{name} fails"), || async {
        let app = apps.get(name).await.ok()?;
        let conditions = app.data.pointer("/status/conditions")?.as_array()?;
        conditions
            .iter()
            .find(|c| c["type"] == "Reconciled" && c["status"] == "False")
            .and_then(|c| c["message"].as_str())
            .map(str::to_string)
    })
    .await
}

/// A bad app of the corpus: its name, files, renderer and expected text.
struct BadApp {
    name: &'static str,
    files: Vec<(&'static str, String)>,
    renderer: Value,
    expect: &'static str,
}

fn bad_apps() -> Vec<BadApp> {
    let first = config_map("first", "");
    let chart = "apiVersion: v2\nname: web\nversion: 0.1.0\n".to_string();
    let lookup = "{{- $s := lookup \"v1\" \"Secret\" \"\" \"x\" }}\n".to_string() + &first;
    let duplicate = r#"{"apiVersion": "v1", "kind": "ConfigMap", "kind": "Secret", "metadata": {"name": "web"}}"#;
    let directory = json!({"directory": {}});
    vec![
        BadApp {
            name: "bad-name",
            files: vec![(
                "names/cm.yaml",
                format!("{first}---\n{}", config_map("Bad_Name", "")),
            )],
            renderer: directory.clone(),
            expect: "names/cm.yaml:6: metadata.name \"Bad_Name\" is not a valid ConfigMap name",
        },
        BadApp {
            name: "bad-label",
            files: vec![
                ("labels/a.yaml", first.clone()),
                (
                    "labels/b.yaml",
                    config_map("web", "  labels:\n    app: \"a b\"\n"),
                ),
            ],
            renderer: directory.clone(),
            expect: "labels/b.yaml:1: ConfigMap web: metadata.labels[\"app\"]: the value \"a b\" is not valid",
        },
        BadApp {
            name: "homoglyph",
            files: vec![("homoglyph/cm.yaml", config_map("w\u{435}b", ""))],
            renderer: directory.clone(),
            expect: "metadata.name \"w\\u{435}b\" is not a valid ConfigMap name",
        },
        BadApp {
            name: "json-duplicate-key",
            files: vec![("json/cm.json", duplicate.to_string())],
            renderer: directory,
            expect: "json/cm.json:1: duplicate key \"kind\"",
        },
        BadApp {
            name: "remote-base",
            files: vec![(
                "remote/kustomization.yaml",
                "resources:\n  - github.com/org/repo//base\n".to_string(),
            )],
            renderer: json!({"kustomize": {}}),
            expect: "remote/kustomization.yaml: resources[0]: github.com/org/repo//base is a remote base",
        },
        BadApp {
            name: "unknown-kind",
            files: vec![
                ("unknown/a.yaml", first.clone()),
                (
                    "unknown/b.yaml",
                    "apiVersion: example.com/v1\nkind: Frobnicator\nmetadata:\n  name: web\n"
                        .to_string(),
                ),
            ],
            renderer: json!({"directory": {}}),
            expect: "validation failed, nothing applied: Frobnicator web: the API server does not serve example.com/v1 Frobnicator",
        },
        BadApp {
            name: "foreign-namespace",
            files: vec![
                ("foreign/a.yaml", first.clone()),
                (
                    "foreign/b.yaml",
                    config_map("web", "")
                        .replace("  name: web\n", "  name: web\n  namespace: kube-system\n"),
                ),
            ],
            renderer: json!({"directory": {}}),
            expect: "ConfigMap kube-system/web is outside the destination namespace",
        },
        BadApp {
            name: "helm-lookup",
            files: vec![
                ("lookup/Chart.yaml", chart),
                ("lookup/templates/cm.yaml", lookup),
            ],
            renderer: json!({"helm": {}}),
            expect: "lookup/templates/cm.yaml:1: calls `lookup`",
        },
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_apps_get_conditions_naming_the_input_and_the_good_app_keeps_syncing() {
    let ns = TestNamespace::create("bad-input").await;
    start_controller(&ns).await;
    let repo = Repo::new();
    let greeting = |text: &str| config_map("greeting", &format!("data:\n  text: \"{text}\"\n"));
    let mut files = vec![("good/greeting.yaml", greeting("hello"))];
    let bad = bad_apps();
    for bad_app in &bad {
        files.extend(bad_app.files.iter().cloned());
    }
    repo.commit(&files, "a good app and bad ones");
    app(&ns, "good", &repo, "good").apply(&ns.client).await;
    greeting_is(&ns, "hello").await;
    let before = rss_mb();

    for bad_app in &bad {
        let path = bad_app.files[0].0.split('/').next().unwrap();
        app(&ns, bad_app.name, &repo, path)
            .renderer(bad_app.renderer.clone())
            .apply(&ns.client)
            .await;
    }
    for BadApp { name, expect, .. } in &bad {
        let message = failure(&ns, name).await;
        if std::env::var_os("BAD_INPUT_SHOW").is_some() {
            eprintln!("{name} | {message}");
        }
        assert!(message.contains(expect), "{name}: {message}");
        assert_eq!(message.lines().count(), 1, "{name}: {message}");
    }
    // Nothing of a bad app was applied, not even its valid objects.
    let config_maps: Api<ConfigMap> = Api::namespaced(ns.client.clone(), &ns.name);
    for name in ["first", "web"] {
        assert!(
            config_maps.get_opt(name).await.unwrap().is_none(),
            "ConfigMap {name} was applied"
        );
    }
    // The good app keeps syncing while the bad ones are retried.
    repo.commit(
        &[("good/greeting.yaml", greeting("still here"))],
        "a change",
    );
    greeting_is(&ns, "still here").await;
    let after = rss_mb();
    println!("controller (test process) RSS: {before:.1} MB before, {after:.1} MB after");
    assert!(after < 150.0, "RSS {after:.1} MB with the bad apps");
}

#[derive(Deserialize)]
struct SpecFile {
    cases: Vec<SpecCase>,
}

#[derive(Deserialize)]
struct SpecCase {
    name: String,
    spec: Value,
    expect: String,
    /// `controller` when the schema takes the spec and the controller must
    /// refuse it; the API server otherwise.
    #[serde(default)]
    by: Option<String>,
}

fn spec_cases(file: &str) -> Vec<SpecCase> {
    let path = tether_testkit::repo_root()
        .join("tests/bad-input")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let file: SpecFile =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    file.cases
}

#[tokio::test(flavor = "multi_thread")]
async fn application_and_break_glass_specs_the_schema_refuses_are_refused_naming_the_field() {
    let ns = TestNamespace::create("bad-specs").await;
    start_controller(&ns).await;
    let mut failures = Vec::new();
    let (mut by_server, mut by_controller) = (0, 0);
    for (file, kind) in [
        ("application/specs.yaml", "Application"),
        ("breakglass/specs.yaml", "BreakGlass"),
    ] {
        let cases = spec_cases(file);
        // All of a file's objects in one `kubectl create`: each is refused
        // on its own line, naming its object and field.
        let objects: Vec<Value> = cases
            .iter()
            .map(|case| {
                let mut object = json!({"apiVersion": "tether.dev/v1alpha1", "kind": kind,
                    "metadata": {"name": case.name, "namespace": ns.name}});
                if !case.spec.is_null() {
                    object["spec"] = case.spec.clone();
                }
                object
            })
            .collect();
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        let output = ns.kubectl_with_stdin(
            &["create", "--validate=false", "-f", "-"],
            &list.to_string(),
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        if std::env::var_os("BAD_INPUT_SHOW").is_some() {
            eprintln!("{stderr}");
        }
        let created = String::from_utf8_lossy(&output.stdout);
        for case in &cases {
            let needle = format!("\"{}\"", case.name);
            let line = stderr.lines().find(|line| line.contains(&needle));
            if case.by.as_deref() == Some("controller") {
                by_controller += 1;
                let message = failure(&ns, &case.name).await;
                if !message.contains(&case.expect) || message.lines().count() != 1 {
                    failures.push(format!(
                        "{kind} {}: expected {:?} in the condition: {message}",
                        case.name, case.expect
                    ));
                }
                continue;
            }
            by_server += 1;
            match line {
                Some(line) if line.contains(&case.expect) => {}
                Some(line) => failures.push(format!(
                    "{kind} {}: expected {:?} in: {line}",
                    case.name, case.expect
                )),
                None => failures.push(format!(
                    "{kind} {}: not refused ({})",
                    case.name,
                    created
                        .lines()
                        .find(|l| l.contains(&case.name))
                        .unwrap_or("?")
                )),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!(
        "bad-input specs: {by_server} refused by the API server, {by_controller} by the \
         controller, each naming the field"
    );
}
