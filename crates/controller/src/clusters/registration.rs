//! Registering a cluster (`tether cluster add`): the identity Tether acts
//! as there — a ServiceAccount bound to a ClusterRole — and its token.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

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
    #[error("{object}: {error}")]
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
    let apply = PatchParams::apply(FIELD_MANAGER).force();
    let failed = |object: String| move |error| RegistrationError::Request { object, error };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .patch(
            namespace,
            &apply,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": namespace}})),
        )
        .await
        .map_err(failed(format!("Namespace {namespace}")))?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    accounts
        .patch(
            SERVICE_ACCOUNT,
            &apply,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace}})),
        )
        .await
        .map_err(failed(format!(
            "ServiceAccount {namespace}/{SERVICE_ACCOUNT}"
        )))?;
    let binding_name = format!("{SERVICE_ACCOUNT}-{namespace}");
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    bindings
        .patch(
            &binding_name,
            &apply,
            &Patch::Apply(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": binding_name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": registration.cluster_role},
                "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                    "namespace": namespace}]})),
        )
        .await
        .map_err(failed(format!("ClusterRoleBinding {binding_name}")))?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    secrets
        .patch(
            TOKEN_SECRET,
            &apply,
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Secret",
                "type": "kubernetes.io/service-account-token",
                "metadata": {"name": TOKEN_SECRET, "namespace": namespace,
                    "annotations": {"kubernetes.io/service-account.name": SERVICE_ACCOUNT}}})),
        )
        .await
        .map_err(failed(format!("Secret {namespace}/{TOKEN_SECRET}")))?;
    let deadline = tokio::time::Instant::now() + TOKEN_WAIT;
    loop {
        let secret = secrets
            .get(TOKEN_SECRET)
            .await
            .map_err(failed(format!("Secret {namespace}/{TOKEN_SECRET}")))?;
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
        .map_err(|error| RegistrationError::Request {
            object: format!("ServiceAccount {namespace}/{SERVICE_ACCOUNT} token request"),
            error,
        })?;
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
