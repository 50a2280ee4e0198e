//! Repository credentials from Kubernetes Secrets.
//!
//! An Application names its Secret in `spec.source.secretRef`; the Secret
//! lives in the Application's namespace and must carry the label
//! `tether.dev/secret-type: repository` (as Argo CD's repository secrets
//! do). Only those Secrets are watched, so reading credentials costs no
//! request and the controller never caches other Secrets. Values never
//! leave `tether_source::Credentials`, whose secrets print as `<redacted>`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::runtime::reflector::{ObjectRef, Store};
use tether_source::{Credentials, Source};

/// The label that makes a Secret usable as repository credentials.
pub const SECRET_TYPE_LABEL: &str = "tether.dev/secret-type";
/// Its value.
pub const REPOSITORY: &str = "repository";

/// The credentials `source` asks for, read from `secrets` (the watched
/// repository Secrets) in `namespace`; `None` when it asks for none.
pub fn for_source(
    secrets: &Store<Secret>,
    namespace: &str,
    source: &Source,
) -> Result<Option<Credentials>, String> {
    let Some(reference) = &source.secret_ref else {
        return Ok(None);
    };
    let key = ObjectRef::<Secret>::new(&reference.name).within(namespace);
    let secret = secrets.get(&key).ok_or_else(|| {
        format!(
            "Secret {namespace}/{}: not found among repository credentials (a Secret in the Application's namespace labelled {SECRET_TYPE_LABEL}={REPOSITORY})",
            reference.name
        )
    })?;
    let mut data: BTreeMap<String, Vec<u8>> = secret
        .data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| (key, value.0))
        .collect();
    for (key, value) in secret.string_data.clone().unwrap_or_default() {
        data.insert(key, value.into_bytes());
    }
    Credentials::from_data(&data)
        .map(Some)
        .map_err(|error| format!("Secret {namespace}/{}: {error}", reference.name))
}
