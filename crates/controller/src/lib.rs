//! Tether's loop: turning desired and live state into applied, reported
//! changes, continuously.
//!
//! - [`run`] wires it up: leader election, the Application watch, the watch
//!   caches of managed objects, and the reconcile workers.
//! - [`reconcile`] is the story for one Application: fetch, observe, diff,
//!   apply, report.
//! - [`sync`] validates a whole set by dry-run, then applies it in order,
//!   wave by wave ([`waves`] waits for health between them when asked).

pub mod admit;
pub mod adopt;
pub mod api;
pub mod break_glass;
pub mod compare;
pub mod context;
pub mod credentials;
pub mod drift;
pub mod health;
pub mod http;
pub mod install;
pub mod invalid;
pub mod live;
pub mod memo;
pub mod operation;
pub mod preview;
pub mod probe;
pub mod prune;
pub mod reconcile;
pub mod replay;
pub mod request;
pub mod run;
pub mod single_writer;
pub mod status;
pub mod status_writes;
pub mod sync;
pub mod trigger;
pub mod waves;

pub use context::{Config, Context};
pub use probe::Probe;
pub use run::{run, run_with};
pub use sync::{SyncError, SyncOptions, SyncReport, sync_manifests, sync_manifests_with};
pub use trigger::Trigger;
