//! Tether's desired state: where manifests come from and what they say.
//!
//! A [`Source`] (repository URL, revision, path, renderer, verification)
//! becomes a deterministic list of [`Manifest`]s, each remembering the file,
//! document and line it came from so errors and later write-backs
//! (`tether adopt`) can point at it.

pub mod adopt;
pub mod cache;
pub mod chart;
mod combined;
pub mod credentials;
pub mod deflated;
pub mod detect;
pub mod directory;
pub mod files;
pub mod git;
pub mod lent;
pub mod limits;
pub mod manifest;
mod packages;
pub mod render;
pub mod repositories;
pub mod spec;
pub mod verify;
pub mod webhook;

pub use combined::SourceInput;
pub use credentials::{Credentials, Secret};
pub use directory::{DirectoryOptions, render_directory};
pub use manifest::{Manifest, ManifestError, Origin};
pub use render::{Capabilities, Sandbox};
pub use repositories::{
    Detected, Rendered, Repositories, SourceError, SourceRevision, render_local,
};
pub use spec::{Renderer, Revision, Source, Verification, VerifyMode};
