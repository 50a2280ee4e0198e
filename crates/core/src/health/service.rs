//! Service: a LoadBalancer needs an ingress point; other types are ready
//! as soon as they exist.

use serde_json::Value;

use super::field::text;
use super::{Health, Subject};

/// A LoadBalancer Service without an ingress IP or hostname →
/// Progressing; every other Service → Healthy.
pub(super) fn assess(object: &Value, subject: &Subject) -> Health {
    let kind = text(object, "/spec/type");
    if kind != "LoadBalancer" {
        return subject.healthy(if kind.is_empty() { "ClusterIP" } else { kind });
    }
    match first_ingress(object) {
        Some("") => subject.healthy("load balancer assigned"),
        Some(address) => subject.healthy(format!("load balancer at {address}")),
        None => subject.progressing("waiting for the load balancer to be assigned"),
    }
}

/// The first IP or hostname in `status.loadBalancer.ingress`: `None` if
/// the list is empty or absent, `""` if its entries carry no address (some
/// controllers assign one without reporting it).
pub(super) fn first_ingress(object: &Value) -> Option<&str> {
    let ingress = object.pointer("/status/loadBalancer/ingress")?.as_array()?;
    if ingress.is_empty() {
        return None;
    }
    let address = ingress.iter().find_map(|point| {
        ["ip", "hostname"]
            .into_iter()
            .filter_map(|key| point.get(key).and_then(Value::as_str))
            .find(|address| !address.is_empty())
    });
    Some(address.unwrap_or(""))
}
