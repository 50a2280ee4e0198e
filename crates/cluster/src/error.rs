//! Errors from talking to the API server, each naming the object first.

use tether_core::ObjectRef;

/// A failed step against the API server.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("kubeconfig {path}: {cause}")]
    Kubeconfig {
        path: String,
        cause: kube::config::KubeconfigError,
    },
    #[error("connecting to the API server: {}", describe(.0))]
    Connect(kube::Error),
    #[error("{object}: {cause}")]
    Manifest {
        object: ObjectRef,
        cause: tether_core::object::ObjectError,
    },
    #[error("{object}: the API server does not serve {api_version} {kind}: {reason}")]
    UnknownKind {
        object: ObjectRef,
        api_version: String,
        kind: String,
        reason: String,
    },
    #[error("{object}: {step} failed: {}", describe(.error))]
    Request {
        object: ObjectRef,
        step: &'static str,
        error: kube::Error,
    },
    #[error("{object}: {message}")]
    Timeout { object: ObjectRef, message: String },
    #[error("discovering what the API server serves: {}", describe(.0))]
    Discovery(kube::Error),
}

impl ClusterError {
    /// Whether trying again later may succeed (the API server was
    /// unreachable or overloaded) rather than the input being wrong.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClusterError::Connect(_)
            | ClusterError::Timeout { .. }
            | ClusterError::Discovery(_) => true,
            ClusterError::Request { error, .. } => match error {
                kube::Error::Api(status) => {
                    status.code == 429 || status.code >= 500 || status.code == 409
                }
                // The object did not fit the request: the input is wrong.
                kube::Error::SerdeError(_) => false,
                _ => true,
            },
            _ => false,
        }
    }
}

impl ClusterError {
    /// The namespace a request found missing (`namespaces "shop" not
    /// found`), if that is why it failed.
    pub fn missing_namespace(&self) -> Option<&str> {
        let ClusterError::Request {
            error: kube::Error::Api(status),
            ..
        } = self
        else {
            return None;
        };
        let name = status
            .message
            .strip_prefix("namespaces \"")?
            .strip_suffix("\" not found")?;
        (status.code == 404).then_some(name)
    }
}

impl ClusterError {
    /// The apiVersion and kind the API server does not serve (yet), if
    /// that is why a request failed.
    pub fn missing_kind(&self) -> Option<(&str, &str)> {
        match self {
            ClusterError::UnknownKind {
                api_version, kind, ..
            } => Some((api_version, kind)),
            _ => None,
        }
    }
}

/// The API server's own message for an API error (e.g. `namespaces "shop"
/// not found`), or the client error's text.
pub fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => {
            format!("{} ({})", status.message, status.reason)
        }
        other => other.to_string(),
    }
}
