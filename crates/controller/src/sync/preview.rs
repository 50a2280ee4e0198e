//! What a sync would change, without changing anything: `tether diff` and
//! `tether sync --dry-run`.
//!
//! [`preview_application`] is how the CLI previews an Application: its
//! source fetched as the controller fetches it (with its repository
//! credentials), then [`preview`]ed object by object.

use std::collections::HashSet;
use std::sync::Arc;

use kube::{Client, ResourceExt};
use serde_json::Value;
use tether_cluster::{Applier, ClusterError, Resources};
use tether_core::ObjectRef;
use tether_core::diff::{Diff, DiffError, IgnoreRule, SecretMask, diff};
use tether_core::tracking::{AppRef, stamp};
use tether_source::{Capabilities, Manifest, Repositories, Source, SourceError, SourceInput};

use crate::api::Application;
use crate::credentials::{self, CredentialsError};

/// One desired object next to its live copy.
#[derive(Debug, Clone)]
pub struct Preview {
    pub id: ObjectRef,
    /// Live state, if the object exists.
    pub live: Option<Value>,
    /// What live state would be after a sync: the server-side dry-run
    /// result (or the manifest, when the dry-run cannot run yet because the
    /// object's Namespace or CRD does not exist).
    pub desired: Value,
    /// The differences; `None` when the object would be created.
    pub diff: Option<Diff>,
}

impl Preview {
    pub fn changes(&self) -> bool {
        self.diff.as_ref().is_none_or(|diff| !diff.is_empty())
    }
}

/// Why a preview could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    #[error(transparent)]
    Fetch(#[from] SourceError),
    #[error("fetch stopped: {0}")]
    FetchStopped(String),
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error("{object}: comparing: {error}")]
    Diff { object: ObjectRef, error: DiffError },
    #[error(transparent)]
    Destination(#[from] tether_cluster::remote::RemoteError),
}

/// An Application's preview, and the commit it previews.
#[derive(Debug, Clone)]
pub struct AppPreview {
    pub commit: String,
    pub previews: Vec<Preview>,
}

/// Fetches `app`'s source (at `revision` instead of its own, if given) with
/// its repository credentials, read with `client` (so its user's RBAC
/// applies), and previews a sync of it with `client` — or, for an app
/// deployed to a registered cluster, with that cluster's credentials, found
/// with `client`: nothing is written.
pub async fn preview_application(
    client: &Client,
    app: &Application,
    revision: Option<&str>,
    repositories: Arc<Repositories>,
) -> Result<AppPreview, PreviewError> {
    let namespace = app.namespace().unwrap_or_default();
    let mut sources: Vec<Source> = app.spec.sources().into_iter().cloned().collect();
    if let Some(revision) = revision {
        sources[0].pin(revision);
    }
    // Fetch with the app's credentials.
    let mut credentials = Vec::new();
    for source in &sources {
        credentials.push(credentials::read(client, &namespace, source).await?);
    }
    // The objects' cluster: this one, or the registered one the app names.
    let target = match &app.spec.destination.cluster {
        Some(name) => tether_cluster::remote::client_of(client, name, &namespace).await?,
        None => client.clone(),
    };
    let capabilities = match sources.iter().any(Source::uses_capabilities) {
        true => tether_cluster::capabilities::discover(&target).await?,
        false => Capabilities::default(),
    };
    let rendered = tokio::task::spawn_blocking(move || {
        let inputs = SourceInput::zip(&sources, &credentials);
        repositories.render_sources(&inputs, &capabilities)
    })
    .await
    .map_err(|error| PreviewError::FetchStopped(error.to_string()))??;
    // Preview every object.
    let creates_namespace = app
        .spec
        .sync_policy
        .create_namespace
        .then_some(app.spec.destination.namespace.as_str());
    let applier = Applier::new(
        Resources::new(target),
        app.spec.destination.namespace.clone(),
    );
    let owner = AppRef::new(&namespace, app.name_any());
    let previews = preview(
        &applier,
        &owner,
        &rendered.manifests,
        &app.spec.ignore_differences,
        creates_namespace,
    )
    .await?;
    Ok(AppPreview {
        commit: rendered.commit,
        previews,
    })
}

/// What a sync creates before the objects that need it: the set's own
/// Namespaces (and the destination, with `createNamespace`), and the kinds
/// its CustomResourceDefinitions define.
struct Foundations {
    namespaces: HashSet<String>,
    /// `(group, Kind)`.
    kinds: HashSet<(String, String)>,
}

impl Foundations {
    fn of(manifests: &[Manifest], creates_namespace: Option<&str>) -> Foundations {
        let text = |object: &Value, pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let of_kind = |kind: &'static str| {
            manifests
                .iter()
                .map(|m| &m.object)
                .filter(move |o| o.get("kind").and_then(Value::as_str) == Some(kind))
        };
        Foundations {
            namespaces: of_kind("Namespace")
                .filter_map(|o| text(o, "/metadata/name"))
                .chain(creates_namespace.map(str::to_string))
                .collect(),
            kinds: of_kind("CustomResourceDefinition")
                .filter_map(|o| Some((text(o, "/spec/group")?, text(o, "/spec/names/kind")?)))
                .collect(),
        }
    }

    /// Whether the set defines kind `kind` of `api_version`.
    fn defines(&self, api_version: &str, kind: &str) -> bool {
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        self.kinds.contains(&(group.to_string(), kind.to_string()))
    }
}

/// Previews a sync of `manifests` for `app`: one GET and one dry-run apply
/// per object, nothing written. What the real sync would hit — a missing
/// namespace or kind the set does not create, a refusal — is an error, as
/// it would be then; `creates_namespace` is the destination namespace when
/// the sync creates it.
pub async fn preview(
    applier: &Applier,
    app: &AppRef,
    manifests: &[Manifest],
    ignore: &[IgnoreRule],
    creates_namespace: Option<&str>,
) -> Result<Vec<Preview>, PreviewError> {
    let foundations = Foundations::of(manifests, creates_namespace);
    let mut previews = Vec::with_capacity(manifests.len());
    for manifest in manifests {
        let mut desired = manifest.object.clone();
        let id = match applier.identify(&desired).await {
            Ok(id) => id,
            // The kind's CRD is part of this very set: it would be created.
            Err(ClusterError::UnknownKind {
                object,
                api_version,
                kind,
                ..
            }) if foundations.defines(&api_version, &kind) => {
                previews.push(Preview {
                    id: object,
                    live: None,
                    desired,
                    diff: None,
                });
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        stamp(&mut desired, app, &id);
        let live = applier.get(&desired).await?;
        let predicted = match applier.apply(&desired, true).await {
            Ok(applied) => applied.live,
            // Its namespace is created by this very set, first.
            Err(error)
                if live.is_none()
                    && error
                        .missing_namespace()
                        .is_some_and(|ns| foundations.namespaces.contains(ns)) =>
            {
                desired.clone()
            }
            Err(error) => return Err(error.into()),
        };
        let diff = match &live {
            Some(live) => {
                Some(
                    // Whoever previews holds no audit key: no trace of a
                    // Secret's values.
                    diff(&predicted, live, ignore, SecretMask::Hidden).map_err(|error| {
                        PreviewError::Diff {
                            object: id.clone(),
                            error,
                        }
                    })?,
                )
            }
            None => None,
        };
        previews.push(Preview {
            id,
            live,
            desired: predicted,
            diff,
        });
    }
    Ok(previews)
}
