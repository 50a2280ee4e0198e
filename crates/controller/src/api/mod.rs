//! Tether's Kubernetes API: the custom resources it serves and reads.

pub mod application;
pub mod application_set;
pub mod break_glass;
pub mod inventory;
pub mod pin;
pub mod project;
pub(crate) mod schema;
pub mod stored;

pub use application::{Application, ApplicationSpec, ApplicationStatus};
pub use application_set::{ApplicationSet, ApplicationSetSpec, ApplicationSetStatus};
pub use break_glass::{BreakGlass, BreakGlassSpec, BreakGlassStatus};
pub use project::{Project, ProjectSpec};
pub use stored::{InvalidSpec, StoredApplication};
