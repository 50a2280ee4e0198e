//! The controller's log as an operator's log pipeline reads it: a start-up
//! line saying what runs where, JSON lines with `--log-format json`, and
//! no colour codes when the log is not a terminal.

mod support;

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use support::{Running, controller_command, installed};
use tether_testkit::{TestNamespace, eventually};

/// `tether run` for `ns` with `extra` arguments, its stderr in a file.
fn controller_logging_to(ns: &TestNamespace, log: &std::path::Path, extra: &[&str]) -> Running {
    let args = [&["--http-addr", "127.0.0.1:0"][..], extra].concat();
    let (mut command, cache) = controller_command(ns, ns, "logger", 30, &args);
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let file = std::fs::File::create(log).unwrap();
    let child = command.stdout(Stdio::null()).stderr(file).spawn().unwrap();
    Running {
        child,
        leftovers: vec![cache],
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_controller_logs_its_start_as_json_lines_and_text_without_colour_codes() {
    let ns = installed("cli-logging").await;

    let json_log = ns.cache_dir().join("json.log");
    let running = controller_logging_to(&ns, &json_log, &["--log-format", "json"]);
    let started = eventually("the start-up line, as JSON", || async {
        let text = std::fs::read_to_string(&json_log).ok()?;
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|line| line["message"] == "tether controller starting")
    })
    .await;
    assert_eq!(started["level"], "INFO", "{started}");
    assert_eq!(started["identity"], "logger", "{started}");
    assert_eq!(started["watching"], ns.name.as_str(), "{started}");
    assert_eq!(started["http"], "127.0.0.1:0", "{started}");
    assert_eq!(started["version"], env!("CARGO_PKG_VERSION"), "{started}");
    assert!(
        started["kubernetes"]
            .as_str()
            .unwrap_or_default()
            .starts_with('v'),
        "{started}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let text = std::fs::read_to_string(&json_log).unwrap();
    for line in text.lines() {
        assert!(
            serde_json::from_str::<Value>(line).is_ok(),
            "not JSON: {line}"
        );
    }
    drop(running);

    let text_log = ns.cache_dir().join("text.log");
    let _running = controller_logging_to(&ns, &text_log, &[]);
    let text = eventually("the start-up line, as text", || async {
        let text = std::fs::read_to_string(&text_log).ok()?;
        text.contains("tether controller starting").then_some(text)
    })
    .await;
    assert!(!text.contains('\u{1b}'), "colour codes in a file: {text:?}");
    assert!(text.contains("identity=logger"), "{text}");
}
