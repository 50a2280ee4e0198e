//! What Tether tells: the next Application status as a pure function of a
//! reconcile's findings ([`status`]), writing it ([`writes`]), and the
//! Kubernetes Events that go with it ([`events`]).

pub mod events;
pub mod notices;
pub mod pinned;
pub mod status;
pub mod writes;
