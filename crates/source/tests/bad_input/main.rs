//! The bad-input corpus (`tests/bad-input/` at the repository root), run
//! through the same code the controller renders with: every case must be
//! refused with its expected one-line error and produce no objects.
//!
//! `BAD_INPUT_SHOW=1` prints each case's actual error (to write a new
//! case's `expect`). The huge cases (a 1 GB repository, a commit of 100k
//! files) run with `cargo test -p tether-source --test bad_input -- --ignored`.

mod corpus;
mod generated;
mod huge;
mod run;

use corpus::corpus;
use run::{Outcome, run_case};

#[test]
fn every_bad_input_case_is_refused_with_its_expected_error() {
    let cases = corpus();
    let failures = refusals(&cases, &run::sandbox());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("bad-input: {} cases, all refused as expected", cases.len());
    assert!(
        cases.len() >= 300,
        "the corpus has only {} cases",
        cases.len()
    );
}

/// The renderer prefers a `kustomize` binary to `kubectl kustomize`; both
/// frame their errors differently, and the message must not depend on
/// which one a machine has.
#[test]
fn the_kustomize_cases_get_the_same_errors_from_kustomize_as_from_kubectl_kustomize() {
    let Some(kustomize) = tether_testkit::tools::built_kustomize_dir() else {
        tether_testkit::tools::skipped(
            "no kustomize built (scripts/go-tool.sh kustomize builds it)",
        );
        return;
    };
    let cases: Vec<_> = corpus()
        .into_iter()
        .filter(|case| case.name.starts_with("kustomize/"))
        .collect();
    let mut sandbox = run::sandbox();
    sandbox.tool_dirs.insert(0, kustomize);
    let failures = refusals(&cases, &sandbox);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!(
        "bad-input: {} kustomize cases, all refused as expected by kustomize",
        cases.len()
    );
    assert!(cases.len() >= 30, "only {} kustomize cases", cases.len());
}

/// Every way `cases`, rendered in `sandbox`, were not refused with their
/// expected one-line error.
fn refusals(cases: &[corpus::Case], sandbox: &tether_source::Sandbox) -> Vec<String> {
    let mut failures = Vec::new();
    for case in cases {
        match run_case(case, sandbox) {
            Outcome::Refused(error) => {
                if std::env::var_os("BAD_INPUT_SHOW").is_some() {
                    eprintln!("{} | {error}", case.name);
                }
                if error.lines().count() > 1 {
                    failures.push(format!("{}: error is not one line: {error}", case.name));
                }
                for expected in &case.expect {
                    if !error.contains(expected.as_str()) {
                        failures.push(format!(
                            "{}: expected {expected:?} in the error, got: {error}",
                            case.name
                        ));
                    }
                }
            }
            Outcome::Accepted(what) => {
                failures.push(format!("{}: accepted ({what})", case.name));
            }
        }
    }
    failures
}
