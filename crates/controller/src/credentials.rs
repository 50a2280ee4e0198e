//! Repository credentials from Kubernetes Secrets.
//!
//! An Application names its Secret in `spec.source.secretRef`; the Secret
//! lives in the Application's namespace and must carry the label
//! `tether.dev/secret-type: repository` (as Argo CD's repository secrets
//! do). [`decode`] turns such a Secret into [`Credentials`]; the controller
//! finds it among the Secrets it watches ([`for_source`]: only labelled
//! ones, so reading credentials costs no request and no other Secret is
//! cached), the CLI reads it with the user's own client ([`read`]: the
//! user's RBAC applies). Values never leave `tether_source::Credentials`,
//! whose secrets print as `<redacted>`, and no error carries one.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use tether_source::{Credentials, Source};

/// The label that makes a Secret usable as repository credentials.
pub const SECRET_TYPE_LABEL: &str = "tether.dev/secret-type";
/// Its value.
pub const REPOSITORY: &str = "repository";

/// Why an Application's repository credentials could not be had. Each
/// names the Secret first and none carries a value from it. Only
/// [`CredentialsError::Read`] may pass by itself when retried; the others
/// need someone to create, label, fill or grant access to the Secret.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error(
        "Secret {namespace}/{name}: not found among repository credentials (a Secret in the Application's namespace labelled {SECRET_TYPE_LABEL}={REPOSITORY})"
    )]
    NotFound { namespace: String, name: String },
    #[error(
        "Secret {namespace}/{name}: not labelled {SECRET_TYPE_LABEL}={REPOSITORY}, so it is not used as repository credentials"
    )]
    NotLabelled { namespace: String, name: String },
    #[error(
        "Secret {namespace}/{name}: the controller reads repository credentials only in {watched}; grant namespace {namespace} with `tether install --secrets-namespace {namespace}` (the controller then runs with `--secrets-namespace {namespace}` too)"
    )]
    NotWatched {
        namespace: String,
        name: String,
        /// The namespaces it reads them in, as a phrase.
        watched: String,
    },
    #[error("Secret {namespace}/{name}: forbidden: {message}")]
    Forbidden {
        namespace: String,
        name: String,
        /// The API server's words (who may not get which Secret).
        message: String,
    },
    #[error("Secret {namespace}/{name}: reading it: {reason}")]
    Read {
        namespace: String,
        name: String,
        reason: String,
    },
    #[error("Secret {namespace}/{name}: {error}")]
    Invalid {
        namespace: String,
        name: String,
        error: tether_source::credentials::CredentialsError,
    },
}

/// The repository credentials in `secret`, which must be labelled as such.
/// Keys in `stringData` (as written, before the API server folds them into
/// `data`) win over `data`.
pub fn decode(secret: &Secret) -> Result<Credentials, CredentialsError> {
    let (namespace, name) = (secret.namespace().unwrap_or_default(), secret.name_any());
    if secret.labels().get(SECRET_TYPE_LABEL).map(String::as_str) != Some(REPOSITORY) {
        return Err(CredentialsError::NotLabelled { namespace, name });
    }
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
    Credentials::from_data(&data).map_err(|error| CredentialsError::Invalid {
        namespace,
        name,
        error,
    })
}

/// The watched repository-credential Secrets: one store for every
/// namespace, or one per namespace the controller may read Secrets in
/// (`tether run --secrets-namespace`), since RBAC cannot grant Secrets by
/// label.
#[derive(Clone)]
pub struct RepositorySecrets(Vec<(Option<String>, Store<Secret>)>);

impl RepositorySecrets {
    /// Secrets of every namespace, in one store.
    pub fn everywhere(store: Store<Secret>) -> Self {
        RepositorySecrets(vec![(None, store)])
    }

    /// Secrets of the given namespaces, a store each.
    pub fn per_namespace(stores: Vec<(String, Store<Secret>)>) -> Self {
        RepositorySecrets(stores.into_iter().map(|(ns, s)| (Some(ns), s)).collect())
    }

    /// The stores, to wait until each has had its first list.
    pub fn stores(&self) -> Vec<Store<Secret>> {
        self.0.iter().map(|(_, store)| store.clone()).collect()
    }

    fn store_of(&self, namespace: &str) -> Option<&Store<Secret>> {
        self.0
            .iter()
            .find(|(watched, _)| watched.as_deref().is_none_or(|w| w == namespace))
            .map(|(_, store)| store)
    }

    fn watched(&self) -> String {
        let names: Vec<_> = self.0.iter().filter_map(|(ns, _)| ns.as_deref()).collect();
        format!("namespaces {}", names.join(", "))
    }
}

/// The credentials `source` asks for, read from `secrets` (the watched
/// repository Secrets) in `namespace`; `None` when it asks for none.
pub fn for_source(
    secrets: &RepositorySecrets,
    namespace: &str,
    source: &Source,
) -> Result<Option<Credentials>, CredentialsError> {
    let Some(reference) = &source.secret_ref else {
        return Ok(None);
    };
    let store = secrets
        .store_of(namespace)
        .ok_or_else(|| CredentialsError::NotWatched {
            namespace: namespace.to_string(),
            name: reference.name.clone(),
            watched: secrets.watched(),
        })?;
    let key = ObjectRef::<Secret>::new(&reference.name).within(namespace);
    let secret = store.get(&key).ok_or_else(|| CredentialsError::NotFound {
        namespace: namespace.to_string(),
        name: reference.name.clone(),
    })?;
    decode(&secret).map(Some)
}

/// The credentials `source` asks for, read from the cluster with `client`
/// (one GET of the Secret in `namespace`, under the client's own RBAC);
/// `None` when it asks for none.
pub async fn read(
    client: &Client,
    namespace: &str,
    source: &Source,
) -> Result<Option<Credentials>, CredentialsError> {
    let Some(reference) = &source.secret_ref else {
        return Ok(None);
    };
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(&reference.name)
        .await
        .map_err(|error| not_read(namespace, &reference.name, error))?;
    decode(&secret).map(Some)
}

/// What a failed GET of Secret `namespace/name` means. A decoding error's
/// text could quote the Secret's data, so it is not repeated.
fn not_read(namespace: &str, name: &str, error: kube::Error) -> CredentialsError {
    let (namespace, name) = (namespace.to_string(), name.to_string());
    match error {
        kube::Error::Api(status) if status.is_not_found() => {
            CredentialsError::NotFound { namespace, name }
        }
        kube::Error::Api(status) if status.is_forbidden() => CredentialsError::Forbidden {
            namespace,
            name,
            message: status.message,
        },
        kube::Error::Api(status) => CredentialsError::Read {
            namespace,
            name,
            reason: format!("{} ({})", status.message, status.code),
        },
        kube::Error::SerdeError(_) => CredentialsError::Read {
            namespace,
            name,
            reason: "the API server's answer could not be decoded".into(),
        },
        error => CredentialsError::Read {
            namespace,
            name,
            reason: error.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use kube::core::Status;

    const VALUE: &str = "s3cr3t-value";

    fn secret(labelled: bool, data: &[(&str, &str)], string_data: &[(&str, &str)]) -> Secret {
        let mut secret = Secret::default();
        secret.metadata.namespace = Some("shop".into());
        secret.metadata.name = Some("repo".into());
        if labelled {
            secret.metadata.labels = Some([(SECRET_TYPE_LABEL.into(), REPOSITORY.into())].into());
        }
        secret.data = Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        );
        secret.string_data = Some(
            string_data
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        secret
    }

    #[test]
    fn a_labelled_secret_decodes_and_string_data_wins_over_data() {
        let decoded = decode(&secret(
            true,
            &[("username", "bot"), ("password", "old")],
            &[("password", VALUE)],
        ))
        .unwrap();
        let Credentials::Http {
            username, password, ..
        } = decoded
        else {
            panic!("HTTP credentials")
        };
        assert_eq!((username.as_str(), password.expose()), ("bot", VALUE));
    }

    #[test]
    fn an_unlabelled_or_incomplete_secret_is_named_and_its_values_never_shown() {
        let unlabelled = decode(&secret(false, &[("password", VALUE)], &[])).unwrap_err();
        assert_eq!(
            unlabelled.to_string(),
            "Secret shop/repo: not labelled tether.dev/secret-type=repository, so it is not used as repository credentials"
        );
        let incomplete = decode(&secret(true, &[("pasword", VALUE)], &[])).unwrap_err();
        let text = format!("{incomplete} {incomplete:?}");
        assert!(text.starts_with("Secret shop/repo: "), "{text}");
        assert!(text.contains("pasword") && !text.contains(VALUE), "{text}");
    }

    #[test]
    fn a_failed_read_says_absent_forbidden_or_why() {
        let api = |code: u16, reason: &str, message: &str| {
            kube::Error::Api(Status::failure(message, reason).with_code(code).boxed())
        };
        let cases = [
            (
                api(404, "NotFound", "secrets \"repo\" not found"),
                "Secret shop/repo: not found among repository credentials (a Secret in the Application's namespace labelled tether.dev/secret-type=repository)",
            ),
            (
                api(
                    403,
                    "Forbidden",
                    "secrets \"repo\" is forbidden: User \"dev\" cannot get resource \"secrets\"",
                ),
                "Secret shop/repo: forbidden: secrets \"repo\" is forbidden: User \"dev\" cannot get resource \"secrets\"",
            ),
            (
                api(500, "InternalError", "etcd is down"),
                "Secret shop/repo: reading it: etcd is down (500)",
            ),
        ];
        for (error, expected) in cases {
            assert_eq!(not_read("shop", "repo", error).to_string(), expected);
        }
        let garbled = serde_json::from_str::<Secret>(&format!("{{\"data\": \"{VALUE}\"}}"))
            .map(|_| ())
            .unwrap_err();
        let text = not_read("shop", "repo", kube::Error::SerdeError(garbled)).to_string();
        assert!(!text.contains(VALUE), "{text}");
    }

    #[test]
    fn a_secret_outside_the_watched_namespaces_says_which_flag_grants_it() {
        let (store, _writer) = kube::runtime::reflector::store::<Secret>();
        let secrets = RepositorySecrets::per_namespace(vec![("tether-system".into(), store)]);
        let source: Source = serde_json::from_value(serde_json::json!({
            "repoURL": "https://git.example.com/shop.git", "path": "app",
            "secretRef": {"name": "repo"}
        }))
        .unwrap();
        let error = for_source(&secrets, "shop", &source)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("Secret shop/repo: the controller reads repository credentials only in namespaces tether-system; grant namespace shop with `tether install --secrets-namespace shop`"),
            "{error}"
        );
        let missing = for_source(&secrets, "tether-system", &source).unwrap_err();
        assert!(
            matches!(missing, CredentialsError::NotFound { .. }),
            "{missing}"
        );
    }
}
