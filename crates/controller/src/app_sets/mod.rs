//! Generated apps: the reconcile of one `ApplicationSet`.
//!
//! Read the generators, gather what they read (a repository's directories,
//! one fetch through the controller's shared object stores; the
//! registered clusters), generate the parameter sets, expand the template,
//! plan against the apps the set made before, apply and delete, report.
//! Every decision is `tether_core::app_set`'s; this module only gathers and
//! carries out. An app the set deletes keeps its objects unless the set
//! says `preserveResourcesOnDeletion: false` (then its cascade finalizer
//! deletes them first; see `crate::reconcile::cascade`).

mod gather;
mod write;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use tether_core::app_set::plan::SET_LABEL;
use tether_core::app_set::{self, Generator};

use crate::api::application_set::{PARAMETERS_GENERATED, RESOURCES_UP_TO_DATE};
use crate::api::{Application, ApplicationSet};
use crate::context::Context;
use crate::shards::{self, Shards};
use crate::watch_retry::Retrying;
pub use write::FIELD_MANAGER;

/// Why a round of one set failed (its status says so too).
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    #[error("ApplicationSet {set}: {step}: {}", tether_cluster::error::describe(.error))]
    Api {
        set: String,
        step: &'static str,
        error: kube::Error,
    },
}

/// How soon a set whose generators failed is tried again.
const RETRY: Duration = Duration::from_secs(15);

/// Runs the ApplicationSet loop until the future is dropped: every set
/// (in the watched namespace, else all) on change and every resync (the
/// repository may have moved; `Config::poll_interval` at most).
/// Sharded (`--shards N`), a set is reconciled by the replica holding the
/// shard its namespace and name fall in, as an Application would be.
pub async fn run(ctx: Arc<Context>, sharded: Option<Shards>) {
    let client = ctx.client.clone();
    let sets: Api<ApplicationSet> = match &ctx.config.watch_namespace {
        Some(namespace) => Api::namespaced(client, namespace),
        None => Api::all(client),
    };
    // Status writes (the set's own) do not wake it: only its spec and identity.
    let (reader, writer) = reflector::store();
    let changes =
        reflector::reflector(writer, watcher(sets, watcher::Config::default()).retrying())
            .applied_objects()
            .predicate_filter(spec_changed, Default::default());
    // A generated app deleted by hand is made again at once.
    let deleted = deleted_apps(&ctx);
    Controller::for_stream(changes, reader)
        .reconcile_on(deleted)
        .run(
            move |set: Arc<ApplicationSet>, ctx| {
                let namespace = set.metadata.namespace.clone().unwrap_or_default();
                let name = set.metadata.name.clone().unwrap_or_default();
                let working = shards::working(&sharded, &namespace, &name);
                async move {
                    match working {
                        Some(_working) => reconcile(set, ctx).await,
                        None => Ok(Action::await_change()),
                    }
                }
            },
            error_policy,
            ctx,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "ApplicationSet round");
            }
        })
        .await;
}

/// The sets whose generated Applications were deleted (a metadata-only
/// watch of the Applications carrying a set's label; nothing else of
/// theirs wakes a set, so their status writes cost it nothing).
fn deleted_apps(ctx: &Context) -> impl futures::Stream<Item = ObjectRef<ApplicationSet>> + use<> {
    let apps: Api<PartialObjectMeta<Application>> = match &ctx.config.watch_namespace {
        Some(namespace) => Api::namespaced(ctx.client.clone(), namespace),
        None => Api::all(ctx.client.clone()),
    };
    watcher(apps, watcher::Config::default().labels(SET_LABEL))
        .retrying()
        .filter_map(|event| async move {
            let watcher::Event::Delete(app) = event.ok()? else {
                return None;
            };
            let set = app.metadata.labels.as_ref()?.get(SET_LABEL)?;
            Some(ObjectRef::new(set).within(app.metadata.namespace.as_deref()?))
        })
}

/// The set's identity and spec (its generation): what a round depends on
/// besides the generators' sources, which the resync covers.
fn spec_changed(set: &ApplicationSet) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    set.metadata.uid.hash(&mut hasher);
    set.metadata.generation.hash(&mut hasher);
    Some(hasher.finish())
}

fn error_policy(_: Arc<ApplicationSet>, error: &SetError, _: Arc<Context>) -> Action {
    tracing::warn!(%error, "ApplicationSet round failed");
    Action::requeue(RETRY)
}

/// One round of one set.
pub async fn reconcile(set: Arc<ApplicationSet>, ctx: Arc<Context>) -> Result<Action, SetError> {
    let namespace = set.metadata.namespace.clone().unwrap_or_default();
    let name = set.metadata.name.clone().unwrap_or_default();
    let mut report = write::Report::new(&set);
    let again = ctx.config.resync.min(ctx.config.poll_interval);

    // Generate the apps and plan; a step that fails says so in
    // `ParametersGenerated`.
    let plan = match plan(&ctx, &set, &namespace, &name, &mut report).await {
        Ok(plan) => plan,
        Err(NotGenerated { reason, message }) => {
            report.failed(PARAMETERS_GENERATED, reason, message);
            return report.write(&ctx, RETRY).await;
        }
    };
    // Apply and delete.
    let failures = write::carry_out(&ctx, &namespace, &plan, &mut report).await;
    let summary = report.summary(&plan);
    match (failures.is_empty(), plan.conflicts.is_empty()) {
        (true, true) => report.succeeded(RESOURCES_UP_TO_DATE, "UpToDate", summary),
        // Another Application holds a generated name: the set's app is missing.
        (true, false) => report.failed(RESOURCES_UP_TO_DATE, "NameTaken", summary),
        (false, _) => report.failed(RESOURCES_UP_TO_DATE, "ApplyFailed", failures.join("; ")),
    }
    report.list_apps(&ctx, &namespace, &plan);
    report.write(&ctx, again).await
}

/// Why a round made no plan: the reason and message of its
/// `ParametersGenerated` condition.
struct NotGenerated {
    reason: &'static str,
    message: String,
}

/// The [`NotGenerated`] of a step that failed with `reason`.
fn not_generated<E: std::fmt::Display>(reason: &'static str) -> impl FnOnce(E) -> NotGenerated {
    move |error| NotGenerated {
        reason,
        message: error.to_string(),
    }
}

/// The plan of one round: read the generators, gather what they read,
/// generate the parameter sets, expand the template for each and plan
/// against the apps the set made before.
async fn plan(
    ctx: &Context,
    set: &ApplicationSet,
    namespace: &str,
    name: &str,
    report: &mut write::Report,
) -> Result<app_set::Plan, NotGenerated> {
    // Read the generators.
    let generators = set
        .spec
        .generators
        .iter()
        .enumerate()
        .map(|(i, value)| Generator::parse(value, &format!("generators[{i}]")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(not_generated("InvalidGenerator"))?;
    // Gather what they read: each repository fetched once, the clusters.
    let (facts, revisions) = gather::facts(ctx, namespace, &generators).await;
    report.revisions = revisions;
    // Generate the parameter sets.
    let generated =
        app_set::generate(&generators, &facts).map_err(not_generated("GeneratorFailed"))?;
    // Expand the template for each.
    let desired = generated
        .iter()
        .map(|params| app_set::expand(name, params, &set.spec.template))
        .collect::<Result<Vec<_>, _>>()
        .map_err(not_generated("TemplateFailed"))?;
    report.generated(generated.len());
    // Plan against the apps the set made before.
    let policy = set.spec.sync_policy.policy();
    let desired = desired
        .into_iter()
        .map(|app| write::owned(app, set, policy))
        .collect();
    let existing = write::existing(ctx, namespace, name).await;
    app_set::plan(desired, &existing, policy).map_err(not_generated("DuplicateName"))
}
