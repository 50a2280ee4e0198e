//! Several sources as one desired state (an Application's `sources`):
//! named Git sources lend their files to the others' `$NAME/…` value
//! files; the objects of every source that renders are one list.

use std::sync::Arc;

use crate::credentials::Credentials;
use crate::files::Files;
use crate::lent::Lent;
use crate::manifest::Manifest;
use crate::render::{Capabilities, RenderError};
use crate::repositories::{Rendered, Repositories, SourceError, SourceRevision, verify};
use crate::spec::Source;

/// One of an Application's sources and the credentials to read it.
#[derive(Debug, Clone, Copy)]
pub struct SourceInput<'a> {
    pub source: &'a Source,
    pub credentials: Option<&'a Credentials>,
}

impl<'a> SourceInput<'a> {
    /// Each of `sources` with its credentials, in order (none past the end
    /// of `credentials`).
    pub fn zip(
        sources: &'a [Source],
        credentials: &'a [Option<Credentials>],
    ) -> Vec<SourceInput<'a>> {
        sources
            .iter()
            .enumerate()
            .map(|(index, source)| SourceInput {
                source,
                credentials: credentials.get(index).and_then(Option::as_ref),
            })
            .collect()
    }
}

impl Repositories {
    /// Renders an Application's sources as one desired state: the named
    /// Git sources lend their files (at their resolved, verified revision)
    /// to the others' `$NAME/…` value files; the objects of every source
    /// that renders are one list, in source order, and an object declared
    /// by two sources is an error naming both places. One unnamed source is
    /// exactly [`Repositories::fetch`].
    pub fn render_sources(
        &self,
        inputs: &[SourceInput<'_>],
        capabilities: &Capabilities,
    ) -> Result<Rendered, SourceError> {
        if let [only] = inputs
            && only.source.name.is_empty()
        {
            return self.fetch(only.source, only.credentials, capabilities);
        }
        let mut lent = Lent::default();
        let mut lenders = Vec::new();
        for input in inputs
            .iter()
            .filter(|i| !i.source.name.is_empty() && !i.source.is_package())
        {
            let (revision, files) = self.snapshot(input.source, input.credentials)?;
            lent.sources.insert(input.source.name.clone(), files);
            lenders.push((input.source, revision));
        }
        let mut parts = Vec::new();
        for input in inputs.iter().filter(|i| i.source.renders()) {
            let rendered = match input.source.is_package() {
                true => {
                    self.render_package(input.source, input.credentials, capabilities, &lent)?
                }
                false => {
                    let update = self.update(&input.source.repo_url, input.credentials)?;
                    self.render_lent(input.source, &update, capabilities, &lent)?
                }
            };
            parts.push(rendered);
        }
        let manifests: Vec<Manifest> = parts
            .iter()
            .flat_map(|part| part.manifests.iter().cloned())
            .collect();
        crate::directory::check_duplicates(&manifests).map_err(RenderError::from)?;
        // Every source's revision, in the Application's order.
        let mut sources: Vec<SourceRevision> =
            parts.iter().flat_map(|part| part.sources.clone()).collect();
        for (source, revision) in lenders.into_iter().filter(|(s, _)| !s.renders()) {
            sources.push(SourceRevision {
                name: source.name.clone(),
                repo_url: source.repo_url.clone(),
                chart: String::new(),
                revision,
                digest: String::new(),
            });
        }
        let order = |revision: &SourceRevision| {
            inputs.iter().position(|i| {
                i.source.name == revision.name && i.source.repo_url == revision.repo_url
            })
        };
        sources.sort_by_key(order);
        let joined = |of: fn(&SourceRevision) -> &str| {
            sources.iter().map(of).collect::<Vec<_>>().join(" + ")
        };
        Ok(Rendered {
            commit: joined(|s| &s.revision),
            tree: joined(|s| &s.digest),
            tag: None,
            empty: manifests.is_empty(),
            digest: crate::manifest::digest(&manifests),
            manifests: Arc::new(manifests),
            verified_by: parts.iter().flat_map(|p| p.verified_by.clone()).collect(),
            sources,
        })
    }

    /// A Git source's whole repository at its resolved (and verified)
    /// revision, and that commit.
    fn snapshot(
        &self,
        source: &Source,
        credentials: Option<&Credentials>,
    ) -> Result<(String, Files), SourceError> {
        let update = self.update(&source.repo_url, credentials)?;
        let (store, resolved) = self.resolved(source, &update)?;
        verify(&store, source, &resolved)?;
        let root = store.tree_at(resolved.commit, "")?;
        Ok((
            resolved.commit.to_string(),
            store.read_tree(root, &self.sandbox.limits, &source.path)?,
        ))
    }
}
