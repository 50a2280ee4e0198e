//! Registering a cluster (`tether cluster add`): the identity Tether acts
//! as there — a ServiceAccount bound to a ClusterRole — and its token.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, Patch, PatchParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The ServiceAccount made on a registered cluster.
pub const SERVICE_ACCOUNT: &str = "tether-manager";
/// Its long-lived token Secret (as `argocd cluster add` makes one).
const TOKEN_SECRET: &str = "tether-manager-token";
/// How long the token controller is given to fill that Secret in.
const TOKEN_WAIT: Duration = Duration::from_secs(10);
/// How long a requested token lasts when no token controller runs.
const REQUESTED_TOKEN_SECONDS: i64 = 365 * 24 * 3600;
const FIELD_MANAGER: &str = "tether-cluster-add";

/// Where the ServiceAccount goes and what it may do.
#[derive(Debug, Clone)]
pub struct Registration {
    pub namespace: String,
    pub cluster_role: String,
}

impl Registration {
    /// The user the cluster's API server sees: Tether's writes there are
    /// this user's.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{SERVICE_ACCOUNT}", self.namespace)
    }
}

/// Why a cluster could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    #[error("{object}: {}", tether_cluster::error::describe(.error))]
    Request { object: String, error: kube::Error },
    #[error(
        "ServiceAccount {namespace}/{SERVICE_ACCOUNT}: no token in Secret {TOKEN_SECRET} after {} s, and the token request returned none",
        TOKEN_WAIT.as_secs()
    )]
    NoToken { namespace: String },
}

/// Makes (or keeps) the ServiceAccount, its ClusterRoleBinding and its
/// token Secret on the cluster `client` reaches, and returns the token.
pub async fn make_service_account(
    client: &kube::Client,
    registration: &Registration,
) -> Result<String, RegistrationError> {
    let namespace = &registration.namespace;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    let what = format!("Namespace {namespace}");
    apply(&namespaces, namespace, object, &what).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let object = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace}});
    let what = format!("ServiceAccount {namespace}/{SERVICE_ACCOUNT}");
    apply(&accounts, SERVICE_ACCOUNT, object, &what).await?;
    let binding_name = format!("{SERVICE_ACCOUNT}-{namespace}");
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let object = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": binding_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": registration.cluster_role},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
            "namespace": namespace}]});
    let what = format!("ClusterRoleBinding {binding_name}");
    apply(&bindings, &binding_name, object, &what).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let object = json!({"apiVersion": "v1", "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": {"name": TOKEN_SECRET, "namespace": namespace,
            "annotations": {"kubernetes.io/service-account.name": SERVICE_ACCOUNT}}});
    let what = format!("Secret {namespace}/{TOKEN_SECRET}");
    apply(&secrets, TOKEN_SECRET, object, &what).await?;
    let deadline = tokio::time::Instant::now() + TOKEN_WAIT;
    loop {
        let secret = secrets.get(TOKEN_SECRET).await.map_err(failed(&what))?;
        let token = secret
            .data
            .and_then(|mut data| data.remove("token"))
            .and_then(|token| String::from_utf8(token.0).ok())
            .filter(|token| !token.is_empty());
        if let Some(token) = token {
            return Ok(token);
        }
        if tokio::time::Instant::now() > deadline {
            // No token controller there (kube-controller-manager not
            // running): ask the API server for a bound token instead.
            return requested_token(&accounts, namespace).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Applies `object`, named `name`, with `api` (server-side, taking over
/// any field another manager holds); a failure names the object as `what`.
async fn apply<K>(
    api: &Api<K>,
    name: &str,
    object: Value,
    what: &str,
) -> Result<K, RegistrationError>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(object))
        .await
        .map_err(failed(what))
}

/// The [`RegistrationError::Request`] of a request about `object` that failed.
fn failed(object: &str) -> impl FnOnce(kube::Error) -> RegistrationError {
    let object = object.to_string();
    move |error| RegistrationError::Request { object, error }
}

/// A token for the ServiceAccount from the TokenRequest API (bound to the
/// account, expiring after a year or the cluster's maximum).
async fn requested_token(
    accounts: &Api<ServiceAccount>,
    namespace: &str,
) -> Result<String, RegistrationError> {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(REQUESTED_TOKEN_SECONDS),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answer = accounts
        .create_token_request(SERVICE_ACCOUNT, &Default::default(), &request)
        .await
        .map_err(failed(&format!(
            "ServiceAccount {namespace}/{SERVICE_ACCOUNT} token request"
        )))?;
    answer
        .status
        .map(|status| status.token)
        .filter(|token| !token.is_empty())
        .ok_or_else(|| RegistrationError::NoToken {
            namespace: namespace.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_a_registered_cluster_sees_is_the_service_account() {
        let registration = Registration {
            namespace: "kube-system".into(),
            cluster_role: "cluster-admin".into(),
        };
        assert_eq!(
            registration.user(),
            "system:serviceaccount:kube-system:tether-manager"
        );
    }
}
