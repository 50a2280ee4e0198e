//! `-o yaml|json` means what it says: `tether app get` and `tether
//! render` print YAML by default and JSON with `-o json`, each parseable
//! as such; `tether drift` and `tether status` take both too.

mod support;

use serde_json::Value;
use support::{app_create_shop, config_map, installed, settings_repo, tether, tether_ok, text};
use tether_controller::api::Application;

#[tokio::test]
async fn app_get_prints_yaml_by_default_and_json_with_o_json() {
    let ns = installed("cli-output-get").await;
    let repo = settings_repo();
    let n = ns.name.as_str();
    app_create_shop(&ns, &repo);

    let yaml = tether_ok(&ns, &["app", "get", "shop", "-n", n]);
    assert!(!yaml.trim_start().starts_with('{'), "not YAML:\n{yaml}");
    let from_yaml: Value = serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{e}:\n{yaml}"));
    let explicit = tether_ok(&ns, &["app", "get", "shop", "-n", n, "-o", "yaml"]);
    assert_eq!(
        from_yaml,
        serde_saphyr::from_str::<Value>(&explicit).unwrap()
    );
    let json = tether_ok(&ns, &["app", "get", "shop", "-n", n, "-o", "json"]);
    let from_json: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(from_yaml, from_json);
    let app: Application = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(app.spec.source.path, "app");

    // The list, and status and drift, in both formats.
    let list: Vec<Application> =
        serde_json::from_str(&tether_ok(&ns, &["app", "list", "-n", n, "-o", "json"])).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(tether_ok(&ns, &["app", "list", "-n", n]), "shop\n");
    for command in [["status", "shop"], ["drift", "shop"]] {
        let args = |format: &'static str| [command[0], command[1], "-n", n, "-o", format];
        let json = tether(&ns, &args("json"));
        let json: Value = serde_json::from_slice(&json.stdout)
            .unwrap_or_else(|e| panic!("{command:?} -o json: {e}: {}", text(&json)));
        let yaml = tether(&ns, &args("yaml"));
        let yaml: Value = serde_saphyr::from_slice(&yaml.stdout)
            .unwrap_or_else(|e| panic!("{command:?} -o yaml: {e}: {}", text(&yaml)));
        assert_eq!(json, yaml, "{command:?}");
    }
    // A bad format is refused by name.
    let bad = tether(&ns, &["app", "get", "shop", "-n", n, "-o", "xml"]);
    assert!(
        !bad.status.success() && text(&bad).contains("xml"),
        "{}",
        text(&bad)
    );
}

#[test]
fn render_prints_a_yaml_stream_by_default_and_a_json_list_with_o_json() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), config_map("a", "yes")).unwrap();
    std::fs::write(dir.path().join("b.yaml"), config_map("b", "0755")).unwrap();
    let path = dir.path().to_str().unwrap();
    let render = |extra: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_tether"))
            .args(["render", "--path", path])
            .args(extra)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output));
        String::from_utf8(output.stdout).unwrap()
    };

    let yaml = render(&[]);
    assert_eq!(yaml, render(&["-o", "yaml"]));
    assert!(yaml.contains("# ConfigMap a: a.yaml:1"), "{yaml}");
    // Read as kubectl (and Tether) read YAML: 1.1 booleans and octals.
    let yaml_1_1 = serde_saphyr::options! {legacy_octal_numbers: true, strict_booleans: false};
    let documents: Vec<Value> = serde_saphyr::from_multiple_with_options(&yaml, yaml_1_1)
        .unwrap_or_else(|e| panic!("{e}:\n{yaml}"));
    let greetings: Vec<&Value> = documents.iter().map(|d| &d["data"]["greeting"]).collect();
    // Strings that YAML 1.1 would read as a boolean or an octal number stay
    // strings.
    assert_eq!(greetings, [&Value::from("yes"), &Value::from("0755")]);

    let json: Value = serde_json::from_str(&render(&["-o", "json"])).unwrap();
    assert_eq!(json["kind"], "List");
    let items = json["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[1]["data"]["greeting"], "0755");
    assert_eq!(items, &documents);
}
