//! The controller's HTTP side: Git webhooks ([`http`], deduplicated by
//! [`replay`]), liveness and readiness ([`probe`]), `/metrics` for whom
//! the API server allows ([`access`]), the [`trigger`] that wakes the
//! apps a push concerns, and [`poll`], which wakes them without a webhook.

pub mod access;
pub mod http;
pub mod poll;
pub mod probe;
pub mod replay;
pub mod trigger;
