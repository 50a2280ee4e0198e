//! Jsonnet apps whose entry file is a function of top-level arguments, and
//! external variables given as code, rendered through the Jsonnet child
//! process as the controller renders them.

use std::path::Path;

use tether_source::files::Files;
use tether_source::render::{RenderError, render};
use tether_source::spec::JsonnetOptions;
use tether_source::{Manifest, Renderer, Sandbox};

fn map(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The `web-tla` fixture at `apps/web`, rendered with `options`.
fn render_web(options: JsonnetOptions) -> Result<Vec<Manifest>, RenderError> {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jsonnet");
    let mut files = Files::read_dir(&fixture).unwrap();
    files.entries = std::mem::take(&mut files.entries)
        .into_iter()
        .map(|(path, entry)| (path.replacen("web-tla/", "apps/web/", 1), entry))
        .collect();
    let sandbox = Sandbox {
        render_program: env!("CARGO_BIN_EXE_tether-render").into(),
        ..Sandbox::default()
    };
    render(
        &Renderer::Jsonnet(options),
        &files,
        "apps/web",
        &sandbox,
        &Default::default(),
    )
}

#[test]
fn a_jsonnet_function_renders_with_top_level_arguments_and_code_ext_vars() {
    let manifests = render_web(JsonnetOptions {
        tlas: map(&[("env", "prod")]),
        tla_code: map(&[("replicas", "3")]),
        ext_code: map(&[("features", "{canary: true, regions: ['eu', 'us']}")]),
        ..Default::default()
    })
    .unwrap();
    let ids: Vec<String> = manifests.iter().map(|m| m.id.to_string()).collect();
    assert_eq!(ids, ["Deployment web-prod", "ConfigMap web-prod"]);
    assert_eq!(manifests[0].object["spec"]["replicas"], 3);
    assert_eq!(
        manifests[0].object["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    assert_eq!(
        manifests[1].object["data"]["features"],
        r#"{"canary":true,"regions":["eu","us"]}"#
    );
}

#[test]
fn a_missing_top_level_argument_is_an_error_naming_the_file_and_the_parameter() {
    let error = render_web(JsonnetOptions {
        ext_code: map(&[("features", "{}")]),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert_eq!(
        error,
        "jsonnet: apps/web/main.jsonnet: top-level argument `env` is required: \
         set it in tlas or tlaCode"
    );
}
