//! The matcher under Tether's glob languages: a pattern is a list of
//! tokens, each taking either one item of the text or any run of items
//! (none included) that it fits. `app_set::glob` runs it over path
//! segments and over each segment's characters, `project::glob` over the
//! bytes of a URL or a name.
//!
//! Patterns come from users, so a match fills a table over (token, text
//! position) instead of backtracking: `*a*a*a*a*b` costs the pattern's
//! size times the text's, never an exponential.

/// One token of a pattern over items of type `T`.
pub(crate) trait Token<T> {
    /// Whether the token takes any run of items (`*`), not exactly one.
    fn repeats(&self) -> bool;
    /// Whether the token may take `item`.
    fn fits(&self, item: &T) -> bool;
}

/// Whether `tokens` match the whole of `text`.
pub(crate) fn matches<T>(tokens: &[impl Token<T>], text: &[T]) -> bool {
    let (n, width) = (text.len(), text.len() + 1);
    // from[i * width + j]: tokens i.. match items j..
    let mut from = vec![false; (tokens.len() + 1) * width];
    from[tokens.len() * width + n] = true;
    for (i, token) in tokens.iter().enumerate().rev() {
        for j in (0..=n).rev() {
            let takes = j < n && token.fits(&text[j]);
            from[i * width + j] = if token.repeats() {
                from[(i + 1) * width + j] || (takes && from[i * width + j + 1])
            } else {
                takes && from[(i + 1) * width + j + 1]
            };
        }
    }
    from[0]
}
