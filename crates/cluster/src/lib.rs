//! Tether's edge to the Kubernetes API.
//!
//! This crate carries out decisions made in `tether-core`: it resolves kinds
//! to API resources, applies objects with server-side apply (field manager
//! `tether`), validates them by dry-run, and waits for conditions. It decides
//! nothing itself beyond how to talk to the API server.

pub mod apply;
pub mod capabilities;
pub mod connect;
pub mod error;
pub mod remote;
pub mod requests;
pub mod resources;
pub mod wait;

pub use apply::{Applied, Applier};
pub use connect::{Connection, connect, connect_observed, connection};
pub use error::ClusterError;
pub use resources::Resources;
