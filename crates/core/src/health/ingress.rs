//! Ingress: ready once the controller assigned an address.

use serde_json::Value;

use super::service::first_ingress;
use super::{Health, Subject};

/// An address in `status.loadBalancer.ingress` → Healthy; none yet →
/// Progressing.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    match first_ingress(object) {
        Some("") => subject.healthy("address assigned"),
        Some(address) => subject.healthy(format!("served at {address}")),
        None => subject.progressing("waiting for an address to be assigned"),
    }
}
