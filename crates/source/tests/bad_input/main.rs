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
    let mut failures = Vec::new();
    let mut counted = 0;
    for case in &cases {
        counted += 1;
        match run_case(case) {
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
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!("bad-input: {counted} cases, all refused as expected");
    assert!(counted >= 300, "the corpus has only {counted} cases");
}
