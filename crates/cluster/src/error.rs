//! Errors from talking to the API server, each naming the object first.

use tether_core::ObjectRef;

/// A failed step against the API server.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("connecting to the API server: {0}")]
    Connect(#[source] kube::Error),
    #[error("{object}: {source}")]
    Manifest {
        object: ObjectRef,
        #[source]
        source: tether_core::object::ObjectError,
    },
    #[error("{object}: the API server does not serve {api_version} {kind}: {reason}")]
    UnknownKind {
        object: ObjectRef,
        api_version: String,
        kind: String,
        reason: String,
    },
    #[error("{object}: {step} failed: {source}")]
    Request {
        object: ObjectRef,
        step: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("{object}: {message}")]
    Timeout { object: ObjectRef, message: String },
}

impl ClusterError {
    /// Whether trying again later may succeed (the API server was
    /// unreachable or overloaded) rather than the input being wrong.
    pub fn is_retryable(&self) -> bool {
        match self {
            ClusterError::Connect(_) | ClusterError::Timeout { .. } => true,
            ClusterError::Request { source, .. } => match source {
                kube::Error::Api(status) => {
                    status.code == 429 || status.code >= 500 || status.code == 409
                }
                _ => true,
            },
            _ => false,
        }
    }
}
