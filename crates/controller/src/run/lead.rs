//! Leading: the caches, the shared [`Context`] and the controllers that
//! run while this replica leads (or holds shards), until the lease is lost.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, Store};
use tokio::sync::mpsc;

use super::watches::{
    applications, sweep_clusters, watch_cluster_secrets, watch_projects, watch_repository_secrets,
    watched, woken,
};
use super::{RunError, Scope, Wiring, apps, windows};
use crate::api::{BreakGlass, Project, StoredApplication};
use crate::break_glass::key;
use crate::break_glass::lifecycle::WindowContext;
use crate::clusters::{Clusters, Target};
use crate::context::{Config, Context, Ready};
use crate::credentials::RepositorySecrets;
use crate::fence::Fence;
use crate::lease;
use crate::metrics::{Leading, Metrics};
use crate::notify::{Notifier, NotifyConfig};
use crate::observe::live::{AppKey, LiveCache};
use crate::serve::poll;
use crate::shards::Shards;

/// Reconciles, as the leader (until the lease is lost) or as the holder
/// of some shards.
pub(super) async fn lead(
    client: Client,
    config: Config,
    wiring: Wiring,
    scope: Scope,
) -> Result<(), RunError> {
    let Wiring {
        trigger,
        probe,
        metrics,
        connection,
    } = wiring;
    let sharded = scope.shards();
    tracing::info!(identity = %config.identity, "leading; reconciling");
    let audit_key = audit_key(&client, &config.lease_namespace).await?;
    warn_unless_controller_namespace(&client, &config.lease_namespace).await;

    let mut running = Running::default();
    let (wake_tx, wake_rx) = mpsc::unbounded_channel::<AppKey>();
    let caches = Caches::watch(&client, &config, connection, &wake_tx, &mut running);
    let (notifier, notifications) = notifications(&client, &config, &metrics);
    running.add(notifications);
    let context = Arc::new(
        Context::new(
            client.clone(),
            caches.clusters,
            (caches.windows.store(), caches.windows_ready),
            caches.secrets,
            audit_key.clone(),
            metrics.clone(),
            config.clone(),
        )
        .notifying(notifier)
        .watching_projects(caches.projects)
        .knowing_apps(caches.apps.0.clone())
        .fenced_by(fence(&client, &config, &scope)),
    );
    let window_context = window_context(&context, audit_key);
    running.add(windows::keep(
        caches.windows,
        sharded.clone(),
        window_context,
    ));
    // Load the cluster's health rules before judging anything.
    let rules_changed = crate::observe::health::watch_cluster_rules(
        client.clone(),
        &config.lease_namespace,
        context.health.clone(),
    )
    .await;
    let (apps_store, apps_writer) = caches.apps;
    let app_events = applications(
        watched(&client, &config),
        (apps_store.clone(), apps_writer),
        probe,
        wake_tx.clone(),
        context.clone(),
    );
    let _reporting = gauges(&metrics, (apps_store.clone(), &context), &config, &sharded);
    let controller = Controller::for_stream(app_events, apps_store);
    trigger.wire(controller.store(), wake_tx.clone());
    // Poll each repository for apps whose revision moved.
    running.add(poll::poll(context.clone(), controller.store(), wake_tx));
    running.add(sweep_clusters(context.clone(), controller.store()));
    let (writes, events) = (context.clone(), context.clone());
    running.add(async move { writes.status_writes.run_deferred().await });
    running.add(async move { events.recorder.run_flush().await });
    // Generated apps (ApplicationSets), with the same caches and sources.
    running.add(crate::app_sets::run(context.clone(), sharded.clone()));
    running.add(apps::reconcile_apps(
        controller,
        woken(wake_rx),
        caches.windows_api,
        futures::stream::select(rules_changed, caches.project_changes),
        sharded,
        context.clone(),
    ));
    tokio::select! {
        () = running.until_one_ends() => Ok(()),
        () = lost(scope) => Err(lease::LeaseError::Lost.into()),
    }
}

/// What runs while this replica leads: the controllers, the watches that
/// fill the caches and their waiters, the delivery and sweep loops. None
/// ends on its own; leading ends with the first that does.
#[derive(Default)]
struct Running(Vec<BoxFuture<'static, ()>>);

impl Running {
    fn add(&mut self, part: impl Future<Output = ()> + Send + 'static) {
        self.0.push(part.boxed());
    }

    async fn until_one_ends(self) {
        futures::future::select_all(self.0).await;
    }
}

/// The caches every reconcile reads: break-glass windows, repository
/// credentials, Projects, Applications and registered clusters; each is
/// ready once first listed.
struct Caches {
    windows: Controller<BreakGlass>,
    windows_api: Api<BreakGlass>,
    windows_ready: Ready,
    secrets: (RepositorySecrets, Ready),
    projects: (Store<Project>, Ready),
    project_changes: BoxStream<'static, ()>,
    apps: (Store<StoredApplication>, Writer<StoredApplication>),
    clusters: Clusters,
}

impl Caches {
    /// Starts watching; the watches and the waiters that mark each cache
    /// ready go to `running`.
    fn watch(
        client: &Client,
        config: &Config,
        connection: Option<tether_cluster::Connection>,
        wake: &mpsc::UnboundedSender<AppKey>,
        running: &mut Running,
    ) -> Caches {
        let live = LiveCache::new(client.clone(), wake.clone());
        let windows_api = watched::<BreakGlass>(client, config);
        let windows = windows::windows(client, windows_api.clone(), config);
        let (windows_ready, windows_waiter) = Ready::of(windows.store());
        let (secrets, secrets_watch) = watch_repository_secrets(client, config);
        let (secrets_ready, secrets_waiter) = Ready::of_all(secrets.stores());
        let (projects, project_changes) = watch_projects(client);
        let (projects_ready, projects_waiter) = Ready::of(projects.clone());
        let (cluster_secrets, cluster_secrets_watch) = watch_cluster_secrets(client, config);
        let (cluster_secrets_ready, cluster_secrets_waiter) = Ready::of(cluster_secrets.clone());
        running.add(windows_waiter);
        running.add(secrets_watch);
        running.add(secrets_waiter);
        running.add(projects_waiter);
        running.add(cluster_secrets_watch);
        running.add(cluster_secrets_waiter);
        let clusters = Clusters::new(
            Target::local(client.clone(), live, connection),
            &config.lease_namespace,
            (cluster_secrets, cluster_secrets_ready),
            wake.clone(),
        );
        Caches {
            windows,
            windows_api,
            windows_ready,
            secrets: (secrets, secrets_ready),
            projects: (projects, projects_ready),
            project_changes: project_changes.boxed(),
            apps: reflector::store(),
            clusters,
        }
    }
}

/// What a break-glass window's reconcile needs of the shared context.
fn window_context(context: &Context, audit_key: key::AuditKey) -> Arc<WindowContext> {
    Arc::new(WindowContext {
        client: context.client.clone(),
        recorder: context.recorder.clone(),
        notifier: context.notifier.clone(),
        cap: context.config.max_window_ttl,
        audit_namespace: context.config.lease_namespace.clone(),
        audit_key,
    })
}

/// Notifications go out from the leader only, as its reconciles find what
/// changed; the future delivers them, and never completes.
fn notifications(
    client: &Client,
    config: &Config,
    metrics: &Arc<Metrics>,
) -> (Notifier, impl Future<Output = ()> + use<>) {
    let (notifier, delivering) = Notifier::start(
        client.clone(),
        NotifyConfig {
            webhooks: config.notify_webhooks.clone(),
            namespace: config.lease_namespace.clone(),
            ..NotifyConfig::default()
        },
        metrics.clone(),
    );
    let delivering = async move {
        delivering.await;
        std::future::pending::<()>().await
    };
    (notifier, delivering)
}

/// What stops a write that is no longer this replica's to make: the
/// leader's Lease, or the Leases of the shards it holds.
fn fence(client: &Client, config: &Config, scope: &Scope) -> Fence {
    match scope {
        Scope::Leader(leading) => Fence::new(
            client,
            (&config.lease_namespace, lease::LEASE_NAME),
            &config.identity,
            leading.clone(),
        ),
        Scope::Shards(shards) => Fence::sharded(
            client,
            &config.lease_namespace,
            &config.identity,
            (shards.count(), shards.held()),
        ),
    }
}

/// The per-app gauges, from the same stores, while this replica leads
/// (of its shards' apps when sharded).
fn gauges(
    metrics: &Arc<Metrics>,
    (apps, context): (Store<StoredApplication>, &Context),
    config: &Config,
    sharded: &Option<Shards>,
) -> Leading {
    let windows = context.windows.clone();
    match sharded {
        None => metrics.lead(apps, windows, config.max_window_ttl),
        Some(shards) => {
            let shards = shards.clone();
            metrics.lead_shards(
                apps,
                windows,
                config.max_window_ttl,
                Arc::new(move |namespace, name| shards.owns(namespace, name)),
            )
        }
    }
}

/// Completes when the leader's lease is lost; never for a sharded
/// replica (shards come and go; no one loss stops it).
async fn lost(scope: Scope) {
    let Scope::Leader(mut leading) = scope else {
        return std::future::pending().await;
    };
    loop {
        if leading.changed().await.is_err() || !*leading.borrow_and_update() {
            return;
        }
    }
}

/// The audit key, created on first use; retried while the API server
/// fails, refused (stopping the controller) if the Secret is malformed.
async fn audit_key(client: &Client, namespace: &str) -> Result<key::AuditKey, RunError> {
    let mut wait = Duration::from_millis(200);
    loop {
        match key::load_or_create(client, namespace).await {
            Ok(key) => return Ok(key),
            Err(error @ key::KeyError::Api { .. }) => {
                tracing::warn!(%error, "reading the audit key failed; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
            Err(error) => return Err(error.into()),
        }
    }
}

/// Audit records may only be created in a namespace `tether install`
/// labelled as a controller's: say so at once rather than on every record.
async fn warn_unless_controller_namespace(client: &Client, namespace: &str) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let labelled = match namespaces.get_opt(namespace).await {
        Ok(found) => found.is_some_and(|ns| {
            ns.metadata
                .labels
                .is_some_and(|l| l.contains_key(crate::install::CONTROLLER_NAMESPACE_LABEL))
        }),
        Err(error) => {
            tracing::debug!(%error, "reading the controller's namespace failed");
            return;
        }
    };
    if !labelled {
        tracing::warn!(
            %namespace,
            "namespace {namespace} is not labelled {}: the admission policy tether-audit-records refuses break-glass audit records there; run `tether install --namespace {namespace}`",
            crate::install::CONTROLLER_NAMESPACE_LABEL
        );
    }
}
