//! The controller's modules form no cycle: each folder and file leans only
//! on modules that do not lean back on it (see `tether_testkit::ModuleGraph`
//! for what counts as a dependency).

#[test]
fn the_controller_modules_have_no_cycle() {
    tether_testkit::ModuleGraph::assert_no_cycles(env!("CARGO_MANIFEST_DIR"), "the controller");
}
