//! What a sync would change, without changing anything: `tether diff` and
//! `tether sync --dry-run`.
//!
//! [`preview_application`] is how the CLI previews an Application: its
//! source fetched as the controller fetches it (with its repository
//! credentials), then [`preview`]ed object by object.

use std::sync::Arc;

use kube::{Client, ResourceExt};
use serde_json::Value;
use tether_cluster::{Applier, ClusterError, Resources};
use tether_core::ObjectRef;
use tether_core::diff::{Diff, DiffError, IgnoreRule, SecretMask, diff};
use tether_core::tracking::{AppRef, stamp};
use tether_source::{Manifest, Repositories, SourceError};

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
}

/// An Application's preview, and the commit it previews.
#[derive(Debug, Clone)]
pub struct AppPreview {
    pub commit: String,
    pub previews: Vec<Preview>,
}

/// Fetches `app`'s source (at `revision` instead of its own, if given) with
/// its repository credentials, read with `client` (so its user's RBAC
/// applies), and previews a sync of it with `client`: nothing is written.
pub async fn preview_application(
    client: &Client,
    app: &Application,
    revision: Option<&str>,
    repositories: Arc<Repositories>,
) -> Result<AppPreview, PreviewError> {
    let namespace = app.namespace().unwrap_or_default();
    let mut source = app.spec.source.clone();
    if let Some(revision) = revision {
        source.revision = revision.to_string();
    }
    // Fetch with the app's credentials.
    let credentials = credentials::read(client, &namespace, &source).await?;
    let rendered =
        tokio::task::spawn_blocking(move || repositories.fetch(&source, credentials.as_ref()))
            .await
            .map_err(|error| PreviewError::FetchStopped(error.to_string()))??;
    // Preview every object.
    let applier = Applier::new(
        Resources::new(client.clone()),
        app.spec.destination.namespace.clone(),
    );
    let owner = AppRef::new(&namespace, app.name_any());
    let previews = preview(
        &applier,
        &owner,
        &rendered.manifests,
        &app.spec.ignore_differences,
    )
    .await?;
    Ok(AppPreview {
        commit: rendered.commit,
        previews,
    })
}

/// Previews a sync of `manifests` for `app`: one GET and one dry-run apply
/// per object, nothing written.
pub async fn preview(
    applier: &Applier,
    app: &AppRef,
    manifests: &[Manifest],
    ignore: &[IgnoreRule],
) -> Result<Vec<Preview>, PreviewError> {
    let mut previews = Vec::with_capacity(manifests.len());
    for manifest in manifests {
        let mut desired = manifest.object.clone();
        let id = match applier.identify(&desired).await {
            Ok(id) => id,
            // The kind's CRD is part of this very set: it would be created.
            Err(ClusterError::UnknownKind { object, .. }) => {
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
            Err(_) if live.is_none() => desired.clone(),
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
