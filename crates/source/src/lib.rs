//! Tether's desired state: where manifests come from and what they say.
//!
//! A source turns a location (for now a local directory; Git comes next)
//! into a deterministic list of [`Manifest`]s, each remembering the file and
//! document it came from so errors and later write-backs can point at it.

pub mod directory;
pub mod manifest;

pub use directory::render_directory;
pub use manifest::{Manifest, Origin, SourceError};
