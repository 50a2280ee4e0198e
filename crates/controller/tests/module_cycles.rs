//! The controller's modules form no cycle: each folder and file leans only
//! on modules that do not lean back on it (see `tether_testkit::ModuleGraph`
//! for what counts as a dependency).

use std::path::Path;

#[test]
fn the_controller_modules_have_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let cycles = tether_testkit::ModuleGraph::read(&src).cycles();
    assert!(
        cycles.is_empty(),
        "module cycles in the controller:\n{}",
        cycles.join("\n")
    );
}
