//! Tether's loop: turning desired and live state into applied, reported
//! changes.
//!
//! For now this holds the sync step: validate a whole set of desired objects
//! by server-side dry-run, then apply them in order. The continuous loop
//! around it (watches, status, self-heal) grows here.

pub mod sync;

pub use sync::{SyncError, SyncReport, sync_manifests};
