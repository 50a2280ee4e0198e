//! Generated apps (`ApplicationSet`, as Argo CD's): generators make sets
//! of parameters, a template turns each set into an Application, and a
//! plan says which Applications to create, update and delete.
//!
//! Pure: the controller lists what the generators read (a repository's
//! directories at a commit, the registered clusters) and hands it in as
//! [`Facts`]; this module decides.

pub mod generator;
pub mod glob;
pub mod plan;
pub mod template;

pub use generator::{Cluster, Facts, GenerateError, Generated, Generator, generate};
pub use plan::{Deletion, Existing, Plan, PlanError, Policy, SyncMode, plan};
pub use template::{TemplateError, expand};

/// One set of parameters: name to value (`path.basename` → `shop`).
pub type Params = std::collections::BTreeMap<String, String>;
