//! Waiting for the API server to act on what was applied.

use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiResource};
use kube::runtime::wait::await_condition;
use serde_json::Value;
use tether_core::ObjectRef;
use tether_core::conditions::condition_is_true;
use tokio::time::Instant;

use crate::ClusterError;

/// How often discovery is asked again while a new CRD's kind is not served.
const DISCOVERY_POLL: Duration = Duration::from_millis(100);

/// Waits until CustomResourceDefinition `name` reports `Established` and
/// discovery serves its kind in every served version, so custom resources
/// of it can be applied at once.
///
/// `Established` alone is not enough: the API server registers the new
/// group-version in discovery a moment later (the aggregator answers
/// `404 page not found` until then), and a client resolving the kind in
/// that window fails.
pub async fn crd_established(
    client: kube::Client,
    name: &str,
    timeout: Duration,
) -> Result<(), ClusterError> {
    let deadline = Instant::now() + timeout;
    let resource = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let object = ObjectRef {
        group: "apiextensions.k8s.io".into(),
        kind: "CustomResourceDefinition".into(),
        namespace: None,
        name: name.into(),
    };
    let established = await_condition(api, name, |crd: Option<&DynamicObject>| {
        crd.is_some_and(|crd| condition_is_true(&crd.data, "Established"))
    });
    let crd = match tokio::time::timeout_at(deadline, established).await {
        Ok(Ok(crd)) => crd,
        Ok(Err(error)) => {
            return Err(ClusterError::Timeout {
                object,
                message: format!("waiting for Established: {error}"),
            });
        }
        Err(_) => {
            return Err(ClusterError::Timeout {
                object,
                message: format!("not Established after {}s", timeout.as_secs()),
            });
        }
    };
    let kinds = crd.map(|crd| served_kinds(&crd.data)).unwrap_or_default();
    for gvk in kinds {
        loop {
            match discovery::pinned_kind(&client, &gvk).await {
                Ok(_) => break,
                Err(error) if Instant::now() + DISCOVERY_POLL >= deadline => {
                    return Err(ClusterError::Timeout {
                        object,
                        message: format!(
                            "Established, but {}/{} {} not served by discovery after {}s: {error}",
                            gvk.group,
                            gvk.version,
                            gvk.kind,
                            timeout.as_secs()
                        ),
                    });
                }
                Err(_) => tokio::time::sleep(DISCOVERY_POLL).await,
            }
        }
    }
    Ok(())
}

/// The group/version/kinds a CRD object declares as served.
fn served_kinds(crd: &Value) -> Vec<GroupVersionKind> {
    let spec = &crd["spec"];
    let (Some(group), Some(kind)) = (spec["group"].as_str(), spec["names"]["kind"].as_str()) else {
        return Vec::new();
    };
    spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|version| version["served"].as_bool().unwrap_or(false))
        .filter_map(|version| version["name"].as_str())
        .map(|version| GroupVersionKind::gvk(group, version, kind))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_served_versions_of_a_crd_are_awaited_in_discovery() {
        let crd = json!({"spec": {"group": "example.com", "names": {"kind": "Gadget"},
            "versions": [{"name": "v1", "served": true}, {"name": "v1beta1", "served": false}]}});
        let kinds = served_kinds(&crd);
        assert_eq!(
            kinds,
            [GroupVersionKind::gvk("example.com", "v1", "Gadget")]
        );
    }
}
