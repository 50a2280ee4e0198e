//! Tether's Kubernetes API: the custom resources it serves and reads.

pub mod application;

pub use application::{Application, ApplicationSpec, ApplicationStatus};
