//! The app's Project (decided by `tether_core::project`): its own spec
//! before anything is fetched — repository, destination, verification —
//! and every rendered object before anything is read, dry-run or applied.
//! A violation refuses the whole commit, naming each object and the rule.
//! Projects are read from the watch cache: no request per reconcile.

use std::time::Duration;

use tether_core::ObjectRef;
use tether_core::project::{self, AppSource, Membership, Rules, Violation};
use tether_source::{Manifest, VerifyMode};

use super::Pass;

/// How long a reconcile waits for the first list of Projects before it
/// refuses the app (fail closed: Projects are a security boundary).
const FIRST_LIST: Duration = Duration::from_secs(30);

/// Why the app's Project refused it: every violation, each naming what and
/// which rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Violations(Vec<Violation>),
    #[error(
        "Projects could not be listed within {}s, so nothing is applied (is the Project CRD installed? `tether install`)",
        FIRST_LIST.as_secs()
    )]
    NotListed,
}

/// Every Project, as (name, rules).
pub async fn projects(pass: &Pass<'_>) -> Result<Vec<(String, Rules)>, Refused> {
    let ctx = pass.ctx;
    match tokio::time::timeout(FIRST_LIST, ctx.projects_ready.wait()).await {
        Ok(true) => {}
        _ => return Err(Refused::NotListed),
    }
    let mut projects: Vec<(String, Rules)> = ctx
        .projects
        .state()
        .iter()
        .map(|project| project.named_rules())
        .collect();
    projects.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(projects)
}

/// The app's project, having admitted its own spec.
pub fn admit_source<'p>(
    pass: &Pass<'_>,
    projects: &'p [(String, Rules)],
) -> Result<Membership<'p>, Refused> {
    let spec = &pass.app.spec;
    let namespace = &pass.key.0;
    let membership = project::project_of(namespace, spec.project.as_deref(), projects)
        .map_err(|violation| Refused::Violations(vec![violation]))?;
    let violations: Vec<_> = spec
        .sources()
        .into_iter()
        .flat_map(|source| {
            project::admit_source(
                membership,
                AppSource {
                    namespace,
                    repo_url: &source.repo_url,
                    destination: &spec.destination.namespace,
                    cluster: spec.destination.cluster.as_deref(),
                    verifies: source.verify.mode != VerifyMode::None,
                },
            )
        })
        .collect();
    // The destination is judged with every source; say it once.
    let mut said = std::collections::HashSet::new();
    let violations: Vec<_> = violations
        .into_iter()
        .filter(|violation| said.insert(violation.to_string()))
        .collect();
    match violations.is_empty() {
        true => Ok(membership),
        false => Err(Refused::Violations(violations)),
    }
}

/// Admits each rendered object, with the namespace the API server will
/// give it (a kind not served yet keeps the one it declares).
pub async fn admit_objects(
    pass: &Pass<'_>,
    membership: Membership<'_>,
    manifests: &[Manifest],
) -> Result<(), Refused> {
    if membership == Membership::Unrestricted {
        return Ok(());
    }
    let mut ids: Vec<ObjectRef> = Vec::with_capacity(manifests.len());
    for manifest in manifests {
        let id = super::identify(&pass.applier, manifest).await;
        ids.push(id);
    }
    let violations = project::admit_objects(membership, &pass.key.0, &ids);
    match violations.is_empty() {
        true => Ok(()),
        false => Err(Refused::Violations(violations)),
    }
}
