//! Tether's decisions, as pure functions from values to values.
//!
//! Nothing in this crate performs I/O, spawns tasks or talks to Kubernetes:
//! the `source`, `cluster` and `controller` crates gather values, call these
//! functions, and carry out what they return. That keeps every decision
//! testable on fixtures alone.

pub mod action;
pub mod alert;
pub mod app_set;
pub mod argocd;
pub mod attribution;
pub mod audit;
pub mod backoff;
pub mod capabilities;
pub mod conditions;
pub mod dependency;
pub mod diff;
pub mod drift;
pub mod error_text;
pub mod generated;
pub mod health;
pub mod hook;
pub mod identity;
pub mod import;
pub mod metadata;
pub mod notice;
pub mod object;
pub mod order;
pub mod ownership;
pub mod poll;
pub mod project;
pub mod prune;
pub mod revision;
pub mod rollback;
pub mod shard;
pub mod state;
pub mod sync_window;
pub mod tracking;
pub mod verify;
pub mod vocabulary;
pub mod watch_retry;
mod wildcard;
pub mod window;

pub use action::Action;
pub use conditions::ConditionStatus;
pub use health::{Health, HealthStatus};
pub use object::ObjectRef;
pub use state::{Initiator, OperationPhase, OperationalState, SyncStatus};
pub use vocabulary::{UnknownWord, Vocabulary};
