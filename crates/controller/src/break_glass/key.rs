//! The controller's audit key: 32 random bytes in the Secret
//! `tether-audit-key` of the controller's namespace, created by the
//! controller the first time it runs. It seals the break-glass audit chain
//! ([`tether_core::audit::chain_mac`]) and masks Secret values in drift
//! ([`tether_core::diff::SecretMask::Keyed`]). Only the controller's service
//! account may read Secrets there; people who read windows, drift or audit
//! records never see it, so they can neither forge a record nor test a
//! guess against a masked value.
//!
//! The key is never rotated by Tether: a new key would make every record
//! sealed with the old one read as forged.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use tether_core::diff::SecretMask;

/// The Secret holding the key, in the controller's namespace.
pub const KEY_SECRET: &str = "tether-audit-key";
/// The key's entry in the Secret's data.
const KEY_ENTRY: &str = "key";
/// Bytes of a new key: as many as HMAC-SHA256's block of output.
const KEY_BYTES: usize = 32;

/// The audit key. Its bytes never print.
#[derive(Clone)]
pub struct AuditKey(Arc<[u8]>);

impl fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuditKey(<redacted>)")
    }
}

impl AuditKey {
    /// A key from bytes held elsewhere (tests).
    pub fn from_bytes(bytes: &[u8]) -> AuditKey {
        AuditKey(bytes.into())
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// How Secret values are masked with this key.
    pub fn secret_mask(&self) -> SecretMask<'_> {
        SecretMask::Keyed(&self.0)
    }
}

/// Why the key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("Secret {namespace}/{KEY_SECRET}: {} (retryable)", tether_cluster::error::describe(.error))]
    Api {
        namespace: String,
        error: kube::Error,
    },
    #[error(
        "Secret {namespace}/{KEY_SECRET}: no data.{KEY_ENTRY}; it seals the break-glass audit log, so it is never replaced by Tether — restore it from a backup, or delete the Secret to start a new key (older records then read as forged)"
    )]
    Malformed { namespace: String },
    #[error("generating the audit key: {0}")]
    Random(getrandom::Error),
}

/// The key in `namespace`, created if there is none yet.
pub async fn load_or_create(client: &Client, namespace: &str) -> Result<AuditKey, KeyError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let failed = |error| KeyError::Api {
        namespace: namespace.to_string(),
        error,
    };
    if let Some(secret) = api.get_opt(KEY_SECRET).await.map_err(failed)? {
        return key_of(&secret, namespace);
    }
    let mut bytes = [0u8; KEY_BYTES];
    getrandom::fill(&mut bytes).map_err(KeyError::Random)?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(KEY_SECRET.into()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/part-of".to_string(),
                "tether".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        immutable: Some(true),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            KEY_ENTRY.to_string(),
            ByteString(bytes.to_vec()),
        )])),
        ..Secret::default()
    };
    match api.create(&PostParams::default(), &secret).await {
        Ok(created) => key_of(&created, namespace),
        // Another replica created it first: use theirs.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            key_of(&api.get(KEY_SECRET).await.map_err(failed)?, namespace)
        }
        Err(error) => Err(failed(error)),
    }
}

fn key_of(secret: &Secret, namespace: &str) -> Result<AuditKey, KeyError> {
    secret
        .data
        .as_ref()
        .and_then(|data| data.get(KEY_ENTRY))
        .filter(|key| !key.0.is_empty())
        .map(|key| AuditKey::from_bytes(&key.0))
        .ok_or_else(|| KeyError::Malformed {
            namespace: namespace.to_string(),
        })
}
