//! Tether's loop: turning desired and live state into applied, reported
//! changes, continuously.
//!
//! The folders, from the bottom up (each leans only on those above it in
//! this list; `tests/module_cycles.rs` keeps it so):
//!
//! - [`api`]: the custom resources Tether serves and reads.
//! - [`observe`]: what the cluster has — the watch caches, health, the
//!   memoized comparison with Git, and drift.
//! - [`sync`]: applying a set of objects — validated by dry-run, in waves —
//!   previewing it, and pruning what Git no longer has.
//! - [`notify`]: delivering notices to webhooks — routes, payloads,
//!   retries — without ever slowing the loop.
//! - [`break_glass`]: emergency windows: their life, audit log and requests.
//! - [`report`]: what status and events say, and writing status.
//! - [`reconcile`]: the story for one Application: fetch, observe, diff,
//!   apply, report — each step one call away.
//! - [`app_sets`]: generated apps — one ApplicationSet's generators,
//!   template and plan carried out (decided by `tether_core::app_set`).
//! - [`serve`]: the HTTP endpoints (webhooks, health probes) and the
//!   trigger that wakes the loop.
//! - [`run`] wires it up: leader election, the watches and the workers.

pub mod adopt;
pub mod api;
pub mod app_sets;
pub mod break_glass;
pub mod clusters;
pub mod context;
pub mod credentials;
pub mod fence;
pub mod guarded;
pub mod install;
pub mod lease;
pub mod metrics;
pub mod notify;
pub mod observe;
pub mod ready;
pub mod reconcile;
pub mod recorder;
pub mod report;
pub mod request;
pub mod rollback;
pub mod run;
pub mod serve;
pub mod shards;
pub mod single_writer;
pub mod sync;
pub mod watch_retry;

pub use context::{Config, Context};
pub use run::{Wiring, run, run_until, run_with};
pub use serve::probe::Probe;
pub use serve::trigger::Trigger;
pub use sync::{SyncError, SyncOptions, SyncReport, sync_manifests, sync_manifests_with};
