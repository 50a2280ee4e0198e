//! Which API resource serves a kind, learnt from discovery and cached.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use kube::Client;
use kube::core::GroupVersionKind;
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use serde_json::Value;
use tether_core::ObjectRef;
use tether_core::object::split_api_version;

use crate::ClusterError;

/// A kind the API server serves: its resource (plural name, version) and
/// whether its objects live in namespaces.
#[derive(Debug, Clone)]
pub struct ServedKind {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// Discovery results, cached per group/version/kind. A kind that is not
/// found is asked again next time, so a CRD created a moment ago is seen.
#[derive(Clone)]
pub struct Resources {
    client: Client,
    cache: Arc<RwLock<HashMap<GroupVersionKind, ServedKind>>>,
}

impl Resources {
    pub fn new(client: Client) -> Self {
        Resources {
            client,
            cache: Arc::default(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The same served kinds (discovered once, shared), reached with
    /// `client` — one that impersonates an Application's ServiceAccount.
    pub fn with_client(&self, client: Client) -> Resources {
        Resources {
            client,
            cache: self.cache.clone(),
        }
    }

    /// The served kind for `object`'s apiVersion and kind.
    pub async fn resolve(
        &self,
        id: &ObjectRef,
        object: &Value,
    ) -> Result<ServedKind, ClusterError> {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let (group, version) =
            split_api_version(api_version).map_err(|cause| ClusterError::Manifest {
                object: id.clone(),
                cause,
            })?;
        let gvk = GroupVersionKind::gvk(group, version, &id.kind);
        if let Some(served) = self.cache.read().expect("lock").get(&gvk) {
            return Ok(served.clone());
        }
        let (resource, capabilities): (ApiResource, ApiCapabilities) =
            discovery::pinned_kind(&self.client, &gvk)
                .await
                .map_err(|error| ClusterError::UnknownKind {
                    object: id.clone(),
                    api_version: api_version.to_string(),
                    kind: id.kind.clone(),
                    reason: unserved(&error),
                })?;
        let served = ServedKind {
            resource,
            namespaced: capabilities.scope == Scope::Namespaced,
        };
        self.cache
            .write()
            .expect("lock")
            .insert(gvk, served.clone());
        Ok(served)
    }
}

/// Why discovery found no such kind, in words: a group/version the API
/// server does not serve at all answers 404 with no Status to parse.
fn unserved(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if status.code == 404 => {
            "no such group/version is served (is its CustomResourceDefinition installed?)".into()
        }
        other => crate::error::describe(other),
    }
}
