//! The reconcile story fits on one screen (STYLE.md): the function that
//! tells one pass, admit → fetch → observe → diff → apply → report, stays
//! short enough to read at once, its details one call away.

/// At most this many lines, signature and closing brace included.
const SCREEN: usize = 60;

#[test]
fn the_reconcile_story_fits_on_one_screen() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/reconcile/mod.rs");
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|line| line.starts_with("async fn story("))
        .expect("src/reconcile/mod.rs: no `async fn story(`");
    let length = lines[start..]
        .iter()
        .position(|line| *line == "}")
        .expect("src/reconcile/mod.rs: `story` does not end")
        + 1;
    assert!(
        length <= SCREEN,
        "src/reconcile/mod.rs:{}: the story is {length} lines, more than {SCREEN}: move details into a step",
        start + 1
    );
}
