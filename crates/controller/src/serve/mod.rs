//! The controller's HTTP side: Git webhooks ([`http`], deduplicated by
//! [`replay`]), liveness and readiness ([`probe`]), and the [`trigger`]
//! that wakes the apps a push concerns.

pub mod http;
pub mod probe;
pub mod replay;
pub mod trigger;
