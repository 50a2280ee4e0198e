//! `tether health`, offline: `--no-shipped-rules` shows what a brand-new
//! CRD gets (built-in checks and the generic inference), `--explain` shows
//! the path of each decision.

use std::process::Command;

use tether_testkit::assert_contains;

const CERTIFICATE: &str = r#"
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: web-tls, generation: 1}
status:
  conditions:
  - {type: Ready, status: "False", reason: Failed, message: "issuer not found"}
---
apiVersion: acid.zalan.do/v1
kind: postgresql
metadata: {name: orders, generation: 2}
status:
  PostgresClusterStatus: UpdateFailed
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, generation: 3}
status:
  observedGeneration: 3
  phase: Running
  conditions:
  - {type: Ready, status: "False", reason: WaitingForDependencies, message: waiting for the database}
"#;

fn health(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("objects.yaml");
    std::fs::write(&file, CERTIFICATE).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tether"))
        .arg("health")
        .arg("-f")
        .arg(&file)
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn without_shipped_rules_an_unseen_crd_is_judged_from_its_status_naming_the_field() {
    let out = health(&["--no-shipped-rules"]);
    assert_contains(
        &out,
        "Degraded     postgresql orders: status.PostgresClusterStatus = UpdateFailed",
    );
    assert_contains(
        &out,
        "Progressing  Widget w: status.conditions[Ready] = False (WaitingForDependencies): waiting for the database",
    );
    assert!(
        out.contains("Degraded     Certificate web-tls: status.conditions[Ready] = False (Failed)"),
        "the generic inference judges the Certificate when the shipped rule is left out:\n{out}"
    );
}

#[test]
fn explain_names_the_rule_that_judged_or_every_signal_the_generic_inference_weighed() {
    let out = health(&["--explain"]);
    assert_contains(
        &out,
        "health rule shipped/cert-manager.yaml: cert-manager.io/Certificate",
    );
    assert_contains(
        &out,
        "no health rule or built-in check for example.com/Widget: generic inference",
    );
    let widget: Vec<&str> = out
        .lines()
        .skip_while(|line| !line.contains("Widget w:"))
        .collect();
    assert!(
        widget[2].contains("→ in progress")
            && widget[2].contains("status.conditions[Ready] = False"),
        "the decisive signal comes first, marked:\n{out}"
    );
    assert!(
        widget
            .iter()
            .any(|line| line.contains("good") && line.contains("status.phase = Running")),
        "the signals that lost are listed too:\n{out}"
    );
}
