//! Fetch: the desired state at the Application's revision, or at the one a
//! pending `tether sync --revision` asks for, with the repository
//! credentials the source names, rendered for the cluster's capabilities
//! when the renderer reads them (Helm).

use std::sync::Arc;
use std::time::Instant;

use tether_cluster::ClusterError;
use tether_source::{
    Capabilities, Credentials, Rendered, Repositories, Source, SourceError, SourceInput,
};

use super::Pass;
use crate::metrics::{Metrics, repo_label};
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
    let ctx = pass.ctx;
    let sources: Vec<Source> = pass.app.spec.sources().into_iter().cloned().collect();
    let renders = Renders {
        credentials: credentials(pass, &sources).await?,
        capabilities: capabilities(pass, &sources).await?,
        sources,
        revisions: revisions.iter().map(|r| r.map(String::from)).collect(),
        repositories: ctx.repositories.clone(),
        metrics: ctx.metrics.clone(),
    };
    let rendered = tokio::task::spawn_blocking(move || renders.run()).await??;
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

/// The credentials each of `sources` names, once the repository Secrets
/// are known.
async fn credentials(
    pass: &Pass<'_>,
    sources: &[Source],
) -> Result<Vec<Option<Credentials>>, FetchError> {
    let ctx = pass.ctx;
    if sources.iter().any(|s| s.secret_ref.is_some()) && !ctx.secrets_ready.wait().await {
        return Err(FetchError::SecretWatchStopped);
    }
    let credentials = sources
        .iter()
        .map(|source| crate::credentials::for_source(&ctx.secrets, &pass.key.0, source))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(credentials)
}

/// What the target cluster serves, when a renderer of `sources` reads it.
async fn capabilities(
    pass: &Pass<'_>,
    sources: &[Source],
) -> Result<Arc<Capabilities>, FetchError> {
    if !sources.iter().any(Source::uses_capabilities) {
        return Ok(Arc::default());
    }
    let capabilities = pass.target.capabilities.get().await;
    capabilities.map_err(FetchError::Capabilities)
}

/// One app's fetch and renders, run off the async threads: its sources
/// with their credentials, rendered at each revision.
struct Renders {
    sources: Vec<Source>,
    credentials: Vec<Option<Credentials>>,
    capabilities: Arc<Capabilities>,
    revisions: Vec<Option<String>>,
    repositories: Arc<Repositories>,
    metrics: Arc<Metrics>,
}

impl Renders {
    /// Fetch, then render, each measured.
    fn run(&self) -> Result<Vec<Rendered>, SourceError> {
        if let ([source], [credentials]) = (&self.sources[..], &self.credentials[..])
            && !source.is_package()
            && source.name.is_empty()
        {
            return self.one_git_source(source, credentials.as_ref());
        }
        // Charts (resolving the version is one conditional index read, the
        // download and the render happen once per digest) and several
        // sources: one step.
        self.revisions
            .iter()
            .map(|revision| {
                let sources = self.at(revision);
                let inputs = SourceInput::zip(&sources, &self.credentials);
                let started = Instant::now();
                let rendered = self
                    .repositories
                    .render_sources(&inputs, &self.capabilities);
                self.metrics.rendered(started.elapsed());
                rendered
            })
            .collect()
    }

    /// One Git source: one fetch, then a render at each revision.
    fn one_git_source(
        &self,
        source: &Source,
        credentials: Option<&Credentials>,
    ) -> Result<Vec<Rendered>, SourceError> {
        let started = Instant::now();
        let update = self.repositories.update(&source.repo_url, credentials);
        let repo = repo_label(&source.repo_url);
        self.metrics
            .git_fetched(&repo, started.elapsed(), update.is_ok());
        let update = update?;
        self.revisions
            .iter()
            .map(|revision| {
                let started = Instant::now();
                let rendered =
                    self.repositories
                        .render(&self.at(revision)[0], &update, &self.capabilities);
                self.metrics.rendered(started.elapsed());
                rendered
            })
            .collect()
    }

    /// The sources, the first pinned at `revision` when given.
    fn at(&self, revision: &Option<String>) -> Vec<Source> {
        let mut sources = self.sources.clone();
        if let Some(revision) = revision {
            sources[0].pin(revision);
        }
        sources
    }
}
