//! `tether adopt`: writing the live values of drifted fields back into Git.
//!
//! - [`path`] reads a drifted field's dotted path back into steps.
//! - [`yaml`] edits one object of a plain manifest file in place, keeping
//!   comments, key order and formatting (JSON files too).
//! - [`scalar`] decides how a value is spelled so that kubectl reads it back
//!   as the same value.

pub mod path;
pub mod scalar;
mod tree;
pub mod yaml;

pub use path::{Selector, SelectorError, Step};
pub use yaml::{EditError, FieldEdit, edit_file};
