//! The controller's HTTP side: Git webhooks ([`http`], deduplicated by
//! [`replay`]), liveness and readiness ([`probe`]), the [`trigger`]
//! that wakes the apps a push concerns, and [`poll`], which wakes them
//! without a webhook.

pub mod http;
pub mod poll;
pub mod probe;
pub mod replay;
pub mod trigger;
