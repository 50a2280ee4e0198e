//! Hostile inputs the review found, for the tests that prove each is
//! refused.

/// One document of the alias bomb: `a` is 10 scalars, each further key 10
/// aliases of the one before, so `e` alone expands to 10^5 nodes: under the
/// budget of 200,000, but not twice.
pub fn alias_document(index: usize) -> String {
    let list = |item: &str| [item; 10].join(",");
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: b{index}}}\na: &a [{}]\nb: &b [{}]\nc: &c [{}]\nd: &d [{}]\ne: [{}]\n",
        list("x"),
        list("*a"),
        list("*b"),
        list("*c"),
        list("*d"),
    )
}

/// The review's alias file: `documents` alias documents (40 make 9 KB).
pub fn alias_bomb(documents: usize) -> String {
    let documents: Vec<String> = (0..documents).map(alias_document).collect();
    documents.join("---\n")
}
