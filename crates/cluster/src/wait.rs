//! Waiting for the API server to act on what was applied.

use std::time::Duration;

use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use kube::runtime::wait::await_condition;
use tether_core::ObjectRef;
use tether_core::conditions::condition_is_true;

use crate::ClusterError;

/// Waits until CustomResourceDefinition `name` reports `Established`, so
/// custom resources of it can be applied.
pub async fn crd_established(
    client: kube::Client,
    name: &str,
    timeout: Duration,
) -> Result<(), ClusterError> {
    let resource = ApiResource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        api_version: "apiextensions.k8s.io/v1".into(),
        kind: "CustomResourceDefinition".into(),
        plural: "customresourcedefinitions".into(),
    };
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let object = ObjectRef {
        group: "apiextensions.k8s.io".into(),
        kind: "CustomResourceDefinition".into(),
        namespace: None,
        name: name.into(),
    };
    let established = await_condition(api, name, |crd: Option<&DynamicObject>| {
        crd.is_some_and(|crd| condition_is_true(&crd.data, "Established"))
    });
    match tokio::time::timeout(timeout, established).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(ClusterError::Timeout {
            object,
            message: format!("waiting for Established: {error}"),
        }),
        Err(_) => Err(ClusterError::Timeout {
            object,
            message: format!("not Established after {}s", timeout.as_secs()),
        }),
    }
}
