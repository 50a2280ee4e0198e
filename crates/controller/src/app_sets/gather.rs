//! What the generators read: each repository's directories at its
//! revision (through the controller's object stores, so the generator and
//! the apps it makes share one fetch), and the registered clusters.

use std::collections::BTreeSet;
use std::time::Instant;

use tether_core::app_set::{Cluster, Facts, Generator};

use crate::context::Context;
use crate::metrics::repo_label;

/// The facts `generators` (of a set in `namespace`) need, and
/// `REPO@COMMIT` for each repository read.
pub async fn facts(
    ctx: &Context,
    namespace: &str,
    generators: &[Generator],
) -> (Facts, Vec<String>) {
    let wanted: BTreeSet<(String, String, Option<String>)> = generators
        .iter()
        .flat_map(Generator::repositories)
        .collect();
    let mut facts = Facts {
        clusters: registered(&ctx.clusters.secrets()),
        ..Facts::default()
    };
    let mut revisions = Vec::new();
    for (repo_url, revision, secret) in wanted {
        let credentials = match credentials(ctx, namespace, &repo_url, secret).await {
            Ok(credentials) => credentials,
            Err(error) => {
                facts.directories.insert((repo_url, revision), Err(error));
                continue;
            }
        };
        let (repositories, metrics) = (ctx.repositories.clone(), ctx.metrics.clone());
        let (url, rev) = (repo_url.clone(), revision.clone());
        let listed = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let update = repositories.update(&url, credentials.as_ref());
            metrics.git_fetched(&repo_label(&url), started.elapsed(), update.is_ok());
            repositories.directories(&url, &rev, &update?)
        })
        .await;
        let listed = match listed {
            Ok(Ok((commit, directories))) => {
                revisions.push(format!("{repo_url}@{commit}"));
                Ok(directories)
            }
            Ok(Err(error)) => Err(error.to_string()),
            Err(error) => Err(format!("listing task failed: {error}")),
        };
        facts.directories.insert((repo_url, revision), listed);
    }
    (facts, revisions)
}

/// The credentials in Secret `secret` of `namespace`, read as an
/// Application's `source.secretRef` is (so the generator and its apps
/// share the repository's updates).
async fn credentials(
    ctx: &Context,
    namespace: &str,
    repo_url: &str,
    secret: Option<String>,
) -> Result<Option<tether_source::Credentials>, String> {
    let Some(name) = secret else {
        return Ok(None);
    };
    if !ctx.secrets_ready.wait().await {
        return Err("the repository Secret watch stopped".into());
    }
    let source = tether_source::Source {
        repo_url: repo_url.to_string(),
        secret_ref: Some(tether_source::spec::SecretRef { name }),
        ..tether_source::Source::default()
    };
    crate::credentials::for_source(&ctx.secrets, namespace, &source).map_err(|e| e.to_string())
}

/// The registered clusters as the `clusters` generator sees them.
pub fn registered(secrets: &[std::sync::Arc<k8s_openapi::api::core::v1::Secret>]) -> Vec<Cluster> {
    secrets
        .iter()
        .map(|secret| {
            let data = tether_cluster::remote::secret_data(secret);
            Cluster {
                name: tether_cluster::remote::registered_name(secret),
                server: data
                    .get(tether_cluster::remote::SERVER_KEY)
                    .and_then(|s| String::from_utf8(s.clone()).ok())
                    .unwrap_or_default(),
                labels: secret.metadata.labels.clone().unwrap_or_default(),
            }
        })
        .collect()
}
