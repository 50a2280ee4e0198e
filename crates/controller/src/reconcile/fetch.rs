//! Fetch: the desired state at the Application's revision, or at the one a
//! pending `tether sync --revision` asks for, with the repository
//! credentials the source names, rendered for the cluster's capabilities
//! when the renderer reads them (Helm).

use std::time::Instant;

use tether_cluster::ClusterError;
use tether_source::{Rendered, Source, SourceError, SourceInput};

use super::Pass;
use crate::metrics::repo_label;
use crate::report::status::Step;

/// Why the desired state could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The repository credentials the source names are not usable.
    #[error(transparent)]
    Credentials(#[from] crate::credentials::CredentialsError),
    #[error("the repository Secret watch stopped")]
    SecretWatchStopped,
    #[error(transparent)]
    Source(#[from] SourceError),
    /// What the cluster serves is not known (discovery failed).
    #[error(transparent)]
    Capabilities(ClusterError),
    #[error("fetch task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl FetchError {
    /// The step that failed: verifying and rendering have their own.
    pub fn step(&self) -> Step {
        match self {
            FetchError::Source(SourceError::Verify(_)) => Step::Verify,
            FetchError::Source(SourceError::Render(_)) => Step::Render,
            _ => Step::Fetch,
        }
    }
}

/// Fetches and renders the source, its first source at `revision` when
/// given (a pending `tether sync --revision`, see
/// [`crate::request::requested_revision`]). A requested revision that
/// cannot be fetched is reported and the request dropped (see
/// `Pass::fail`), so it cannot wedge the app.
pub async fn desired(pass: &Pass<'_>, revision: Option<&str>) -> Result<Rendered, FetchError> {
    let mut rendered = desired_at(pass, &[revision]).await?;
    Ok(rendered.remove(0))
}

/// [`desired`] at each of `revisions` (`None`: the source's own), from one
/// fetch of the repository: a rollback's pin renders the branch head and
/// the pinned commit.
pub async fn desired_at(
    pass: &Pass<'_>,
    revisions: &[Option<&str>],
) -> Result<Vec<Rendered>, FetchError> {
    let (ctx, app) = (pass.ctx, &pass.app);
    let repositories = ctx.repositories.clone();
    let sources: Vec<Source> = app.spec.sources().into_iter().cloned().collect();
    let revisions: Vec<Option<String>> = revisions.iter().map(|r| r.map(String::from)).collect();
    let at = move |revision: &Option<String>| {
        let mut sources = sources.clone();
        if let Some(revision) = revision {
            sources[0].pin(revision);
        }
        sources
    };
    let sources = at(&None);
    if sources.iter().any(|s| s.secret_ref.is_some()) && !ctx.secrets_ready.wait().await {
        return Err(FetchError::SecretWatchStopped);
    }
    let credentials = sources
        .iter()
        .map(|source| crate::credentials::for_source(&ctx.secrets, &pass.key.0, source))
        .collect::<Result<Vec<_>, _>>()?;
    let capabilities = match sources.iter().any(Source::uses_capabilities) {
        true => pass
            .target
            .capabilities
            .get()
            .await
            .map_err(FetchError::Capabilities)?,
        false => Default::default(),
    };
    // Fetch, then render, each measured.
    let metrics = ctx.metrics.clone();
    let rendered = tokio::task::spawn_blocking(move || {
        if let ([source], [credentials]) = (&sources[..], &credentials[..])
            && !source.is_package()
            && source.name.is_empty()
        {
            let started = Instant::now();
            let update = repositories.update(&source.repo_url, credentials.as_ref());
            let repo = repo_label(&source.repo_url);
            metrics.git_fetched(&repo, started.elapsed(), update.is_ok());
            let update = update?;
            return revisions
                .iter()
                .map(|revision| {
                    let started = Instant::now();
                    let rendered = repositories.render(&at(revision)[0], &update, &capabilities);
                    metrics.rendered(started.elapsed());
                    rendered
                })
                .collect::<Result<Vec<_>, _>>();
        }
        // Charts (resolving the version is one conditional index read, the
        // download and the render happen once per digest) and several
        // sources: one step.
        revisions
            .iter()
            .map(|revision| {
                let sources = at(revision);
                let inputs = SourceInput::zip(&sources, &credentials);
                let started = Instant::now();
                let rendered = repositories.render_sources(&inputs, &capabilities);
                metrics.rendered(started.elapsed());
                rendered
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .await??;
    // A CRD this app declares and discovery has not seen: the next Helm
    // render (of any app) discovers again.
    for rendered in &rendered {
        let objects = rendered.manifests.iter().map(|manifest| &manifest.object);
        pass.target
            .capabilities
            .forget_unless_serving(objects)
            .await;
    }
    Ok(rendered)
}
