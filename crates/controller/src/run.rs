//! Running the controller: lead, watch, reconcile, until stopped.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use tokio::sync::mpsc;

use crate::api::{BreakGlass, Project, StoredApplication};
use crate::break_glass::lifecycle::{self, WindowContext};
use crate::break_glass::{audit, key};
use crate::clusters::{Clusters, Target};
use crate::context::{Config, Context, Ready};
use crate::credentials;
use crate::lease;
use crate::metrics::Metrics;
use crate::notify::{Notifier, NotifyConfig};
use crate::observe::live::{AppKey, LiveCache};
use crate::reconcile::{error_policy, reconcile};
use crate::serve::poll;
use crate::serve::probe::Probe;
use crate::serve::trigger::Trigger;
use crate::shards::{self, Shards};
use tether_cluster::remote::CLUSTER_LABEL;

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Lease(#[from] lease::LeaseError),
    #[error(transparent)]
    AuditKey(#[from] key::KeyError),
}

/// Runs the controller until the process is stopped: waits to lead (a
/// Lease, so two replicas never both act), then reconciles every
/// Application on change, on changes to its managed objects, when a poll
/// finds its revision moved, and on a periodic resync.
pub async fn run(client: Client, config: Config) -> Result<(), RunError> {
    run_with(client, config, Trigger::default(), Probe::default()).await
}

/// [`run`], with `trigger` wired to wake Applications early (a webhook)
/// and `probe` told whether the Application watch works (`/healthz`).
pub async fn run_with(
    client: Client,
    config: Config,
    trigger: Trigger,
    probe: Probe,
) -> Result<(), RunError> {
    let wiring = Wiring {
        trigger,
        probe,
        ..Wiring::default()
    };
    run_until(client, config, wiring, std::future::pending()).await
}

/// What the controller shares with the HTTP endpoints that serve it.
#[derive(Clone, Default)]
pub struct Wiring {
    /// Wakes Applications early (a push webhook).
    pub trigger: Trigger,
    /// Told whether the Application watch works (`/healthz`, `/readyz`).
    pub probe: Probe,
    /// What the controller measures (`/metrics`): the per-app gauges while
    /// it leads.
    pub metrics: Arc<Metrics>,
    /// How to make clients that impersonate the ServiceAccounts
    /// Applications name; without it such an app is refused, saying so.
    pub connection: Option<tether_cluster::Connection>,
}

/// [`run_with`] until `shutdown` completes (SIGTERM): then the work in
/// flight is dropped (an interrupted sync is converged by the next leader)
/// and the Lease given back, so another replica leads at once rather than
/// when the Lease expires.
pub async fn run_until(
    client: Client,
    config: Config,
    wiring: Wiring,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
    if config.shards > 0 {
        return run_sharded(client, config, wiring, shutdown).await;
    }
    let mut shutdown = std::pin::pin!(shutdown);
    let identity = config.identity.clone();
    let pod = config.pod.clone();
    if let Some(pod) = &pod {
        lease::label_pod(&client, pod, false).await;
    }
    let acquired = tokio::select! {
        hold = lease::acquire(&client, &config, &wiring.probe) => Some(hold?),
        () = &mut shutdown => None,
    };
    let Some(hold) = acquired else {
        return Ok(());
    };
    if let Some(pod) = &pod {
        lease::label_pod(&client, pod, true).await;
    }
    let leading = hold.leading.clone();
    let result = tokio::select! {
        result = lead(client.clone(), config, wiring, Scope::Leader(leading)) => result,
        () = shutdown => {
            tracing::info!(%identity, "stopping: giving the lease back");
            Ok(())
        }
    };
    if let Some(pod) = &pod {
        lease::label_pod(&client, pod, false).await;
    }
    hold.release(&identity).await;
    result
}

/// [`run_until`] with `--shards N`: every replica reconciles, each the apps
/// of the shards it holds (see [`crate::shards`]); on `shutdown` it gives
/// its shards back, so the others take them at once.
async fn run_sharded(
    client: Client,
    config: Config,
    wiring: Wiring,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), RunError> {
    let identity = config.identity.clone();
    let pod = config.pod.clone();
    let (shards, mut keeper) =
        shards::keeper(&client, &config.lease_namespace, &identity, config.shards);
    tracing::info!(%identity, shards = config.shards, "sharded: reconciling the apps of the shards held");
    let reported = shards::report(&client, pod.clone(), shards.clone(), wiring.metrics.clone());
    let result = tokio::select! {
        () = keeper.run() => Ok(()),
        result = lead(client.clone(), config, wiring, Scope::Shards(shards)) => result,
        () = reported => Ok(()),
        () = shutdown => {
            tracing::info!(%identity, "stopping: giving the shards back");
            Ok(())
        }
    };
    keeper.release().await;
    if let Some(pod) = &pod {
        lease::label_pod(&client, pod, false).await;
    }
    result
}

/// Which apps this replica reconciles: all while it leads, or those of
/// the shards it holds.
enum Scope {
    Leader(tokio::sync::watch::Receiver<bool>),
    Shards(Shards),
}

impl Scope {
    fn shards(&self) -> Option<Shards> {
        match self {
            Scope::Leader(_) => None,
            Scope::Shards(shards) => Some(shards.clone()),
        }
    }
}

/// Reconciles, as the leader (until the lease is lost) or as the holder
/// of some shards.
async fn lead(
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

    let (wake_tx, wake_rx) = mpsc::unbounded_channel::<AppKey>();
    let live = LiveCache::new(client.clone(), wake_tx.clone());
    let (windows_api, apps): (Api<BreakGlass>, Api<StoredApplication>) =
        match &config.watch_namespace {
            Some(namespace) => (
                Api::namespaced(client.clone(), namespace),
                Api::namespaced(client.clone(), namespace),
            ),
            None => (Api::all(client.clone()), Api::all(client.clone())),
        };
    // A window is checked again whenever one of its audit records (in the
    // controller's namespace) is added, changed or removed.
    let audit_records: Api<ConfigMap> = Api::namespaced(client.clone(), &config.lease_namespace);
    let windows = Controller::new(windows_api.clone(), watcher::Config::default()).watches(
        audit_records,
        watcher::Config::default().labels(audit::WINDOW_UID_LABEL),
        |record: ConfigMap| {
            let window = record
                .metadata
                .annotations?
                .remove(audit::WINDOW_ANNOTATION)?;
            let (namespace, name) = window.split_once('/')?;
            Some(ObjectRef::<BreakGlass>::new(name).within(namespace))
        },
    );
    // Repository credentials: only Secrets labelled as such are watched,
    // in the namespaces the controller may read Secrets in.
    let (secrets, secrets_watch) = watch_repository_secrets(&client, &config);
    // Projects: every app is judged again when one changes.
    let (projects, projects_writer) = reflector::store();
    let project_changes = reflector::reflector(
        projects_writer,
        watcher(
            Api::<Project>::all(client.clone()),
            watcher::Config::default(),
        )
        .default_backoff(),
    )
    .filter_map(|event| async move {
        match event {
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => Some(()),
            Ok(_) => None,
            Err(error) => {
                tracing::warn!(%error, "the Project watch was interrupted; retrying");
                None
            }
        }
    });
    let (projects_ready, projects_waiter) = Ready::of(projects.clone());
    let (windows_ready, windows_waiter) = Ready::of(windows.store());
    let (secrets_ready, secrets_waiter) = Ready::of_all(secrets.stores());
    // Notifications go out from the leader only, as its reconciles find
    // what changed.
    let (notifier, notifications) = Notifier::start(
        client.clone(),
        NotifyConfig {
            webhooks: config.notify_webhooks.clone(),
            namespace: config.lease_namespace.clone(),
            ..NotifyConfig::default()
        },
        metrics.clone(),
    );
    let notifications = async move {
        notifications.await;
        std::future::pending::<()>().await
    };
    // Applications decode one by one into this cache (below).
    let (apps_store, apps_writer) = reflector::store();
    // Registered clusters: Secrets labelled as such in the controller's namespace.
    let (cluster_secrets, cluster_secrets_watch) = watch_cluster_secrets(&client, &config);
    let (cluster_secrets_ready, cluster_secrets_waiter) = Ready::of(cluster_secrets.clone());
    let clusters = Clusters::new(
        Target::local(client.clone(), live, connection),
        &config.lease_namespace,
        (cluster_secrets, cluster_secrets_ready),
        wake_tx.clone(),
    );
    let context = Arc::new(
        Context::new(
            client.clone(),
            clusters,
            (windows.store(), windows_ready),
            (secrets, secrets_ready),
            audit_key.clone(),
            metrics.clone(),
            config.clone(),
        )
        .notifying(notifier)
        .watching_projects((projects, projects_ready))
        .knowing_apps(apps_store.clone())
        .fenced_by(match &scope {
            Scope::Leader(leading) => crate::fence::Fence::new(
                &client,
                (&config.lease_namespace, lease::LEASE_NAME),
                &config.identity,
                leading.clone(),
            ),
            Scope::Shards(shards) => crate::fence::Fence::sharded(
                &client,
                &config.lease_namespace,
                &config.identity,
                (shards.count(), shards.held()),
            ),
        }),
    );
    let window_context = Arc::new(WindowContext {
        client: client.clone(),
        recorder: context.recorder.clone(),
        notifier: context.notifier.clone(),
        cap: config.max_window_ttl,
        audit_namespace: config.lease_namespace.clone(),
        audit_key,
    });
    // A window is kept by the replica that reconciles its app.
    let windows = windows
        .reconcile_all_on(shards::gained(&sharded))
        .run(
            {
                let sharded = sharded.clone();
                move |window: Arc<BreakGlass>, ctx| {
                    let namespace = window.metadata.namespace.clone().unwrap_or_default();
                    let working = shards::working(&sharded, &namespace, &window.spec.application);
                    async move {
                        match working {
                            Some(_working) => lifecycle::reconcile(window, ctx).await,
                            None => Ok(controller::Action::await_change()),
                        }
                    }
                }
            },
            lifecycle::error_policy,
            window_context,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "break-glass round");
            }
        });
    // Load the cluster's health rules before judging anything.
    let rules_changed = crate::observe::health::watch_cluster_rules(
        client.clone(),
        &config.lease_namespace,
        context.health.clone(),
    )
    .await;
    let wakes = futures::stream::unfold(wake_rx, |mut rx| async move {
        let (namespace, name) = rx.recv().await?;
        Some((
            ObjectRef::<StoredApplication>::new(&name).within(&namespace),
            rx,
        ))
    });
    // Applications decode one by one (a malformed one cannot stop the
    // list), and the watch tells the probe whether it works.
    let app_events = reflector::reflector(
        apps_writer,
        watcher(apps, watcher::Config::default())
            .default_backoff()
            .modify(StoredApplication::forget_managed_fields),
    )
    .inspect(move |event| match event {
        Ok(watcher::Event::InitDone) => probe.watch_ok(true),
        Ok(_) => probe.watch_ok(false),
        Err(error) => {
            tracing::error!(%error, "cannot list or watch Applications; retrying");
            probe.watch_failed(&error.to_string());
        }
    })
    .applied_objects()
    // Apps waiting for one whose sync or health moved are woken; a status
    // this controller wrote, once cached, is not kept a second time.
    .inspect({
        let (apps, wake) = (apps_store.clone(), wake_tx.clone());
        let waker = crate::reconcile::dependencies::Waker::default();
        let context = context.clone();
        move |app| {
            if let Ok(app) = app {
                waker.arrived(app, &apps, &wake);
                context.cache_saw(app);
            }
        }
    })
    .predicate_filter(worth_reconciling, Default::default());
    // The per-app gauges, from the same stores, while this replica leads
    // (of its shards' apps when sharded).
    let _reporting = match &sharded {
        None => metrics.lead(
            apps_store.clone(),
            context.windows.clone(),
            config.max_window_ttl,
        ),
        Some(shards) => {
            let shards = shards.clone();
            metrics.lead_shards(
                apps_store.clone(),
                context.windows.clone(),
                config.max_window_ttl,
                Arc::new(move |namespace, name| shards.owns(namespace, name)),
            )
        }
    };
    let controller = Controller::for_stream(app_events, apps_store);
    let apps_seen = controller.store();
    trigger.wire(controller.store(), wake_tx.clone());
    // Poll each repository for apps whose revision moved.
    let polls = poll::poll(context.clone(), controller.store(), wake_tx);
    let controller = controller
        .with_config(
            controller::Config::default()
                .concurrency(config.concurrency)
                .debounce(Duration::from_millis(20)),
        )
        .reconcile_on(wakes)
        // A window opening, expiring or closing changes what self-heal may do.
        .watches(
            windows_api,
            watcher::Config::default(),
            |window: BreakGlass| {
                let namespace = window.metadata.namespace.clone()?;
                Some(
                    ObjectRef::<StoredApplication>::new(&window.spec.application)
                        .within(&namespace),
                )
            },
        )
        .reconcile_all_on(rules_changed)
        .reconcile_all_on(project_changes)
        // A shard gained: its apps are reconciled at once.
        .reconcile_all_on(shards::gained(&sharded))
        .run(
            {
                let sharded = sharded.clone();
                move |app: Arc<StoredApplication>, ctx| {
                    let meta = &app.metadata;
                    let namespace = meta.namespace.as_deref().unwrap_or_default();
                    let name = meta.name.as_deref().unwrap_or_default();
                    let working = shards::working(&sharded, namespace, name);
                    async move {
                        match working {
                            Some(_working) => reconcile(app, ctx).await,
                            None => Ok(controller::Action::await_change()),
                        }
                    }
                }
            },
            error_policy,
            context.clone(),
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile round");
            }
        });
    let lost = async {
        let Scope::Leader(mut leading) = scope else {
            // Shards come and go; no one loss stops the replica.
            return std::future::pending().await;
        };
        loop {
            if leading.changed().await.is_err() || !*leading.borrow_and_update() {
                return;
            }
        }
    };
    let deferred_status = context.status_writes.run_deferred();
    let cluster_sweep = sweep_clusters(context.clone(), apps_seen);
    let event_series = context.recorder.run_flush();
    // Generated apps (ApplicationSets), with the same caches and sources.
    let app_sets = crate::app_sets::run(context.clone(), sharded.clone());
    tokio::select! {
        () = controller => Ok(()),
        () = polls => Ok(()),
        () = deferred_status => Ok(()),
        () = event_series => Ok(()),
        () = app_sets => Ok(()),
        () = notifications => Ok(()),
        () = windows => Ok(()),
        () = secrets_watch => Ok(()),
        () = cluster_secrets_watch => Ok(()),
        () = cluster_secrets_waiter => Ok(()),
        () = cluster_sweep => Ok(()),
        () = windows_waiter => Ok(()),
        () = secrets_waiter => Ok(()),
        () = projects_waiter => Ok(()),
        () = lost => Err(lease::LeaseError::Lost.into()),
    }
}

/// The repository-credential Secrets (labelled as such) in the watched
/// namespace, else each of `secrets_namespaces`, else every namespace; and
/// the future that keeps them watched.
fn watch_repository_secrets(
    client: &Client,
    config: &Config,
) -> (
    credentials::RepositorySecrets,
    impl std::future::Future<Output = ()> + use<>,
) {
    let namespaces: Vec<Option<String>> =
        match (&config.watch_namespace, &config.secrets_namespaces) {
            (Some(namespace), _) => vec![Some(namespace.clone())],
            (None, some) if !some.is_empty() => some.iter().cloned().map(Some).collect(),
            (None, _) => vec![None],
        };
    let labelled = watcher::Config::default().labels(&format!(
        "{}={}",
        credentials::SECRET_TYPE_LABEL,
        credentials::REPOSITORY
    ));
    let mut stores = Vec::new();
    let mut watches = Vec::new();
    for namespace in namespaces {
        let api: Api<Secret> = match &namespace {
            Some(namespace) => Api::namespaced(client.clone(), namespace),
            None => Api::all(client.clone()),
        };
        let (store, writer) = reflector::store();
        stores.push((namespace, store));
        let watch = reflector::reflector(writer, watcher(api, labelled.clone()).default_backoff())
            .for_each(|event| async move {
                if let Err(error) = event {
                    tracing::warn!(%error, "the repository Secret watch was interrupted; retrying");
                }
            });
        watches.push(watch);
    }
    let secrets = match stores.as_slice() {
        [(None, store)] => credentials::RepositorySecrets::everywhere(store.clone()),
        _ => credentials::RepositorySecrets::per_namespace(
            stores
                .into_iter()
                .filter_map(|(ns, store)| Some((ns?, store)))
                .collect(),
        ),
    };
    let watch = async move {
        futures::future::join_all(watches).await;
    };
    (secrets, watch)
}

/// The cluster Secrets (labelled [`CLUSTER_LABEL`]) in the controller's
/// namespace, and the future that keeps them watched.
fn watch_cluster_secrets(
    client: &Client,
    config: &Config,
) -> (
    reflector::Store<Secret>,
    impl std::future::Future<Output = ()> + use<>,
) {
    let api: Api<Secret> = Api::namespaced(client.clone(), &config.lease_namespace);
    let labelled = watcher::Config::default().labels(&format!("{CLUSTER_LABEL}=true"));
    let (store, writer) = reflector::store();
    let watch = reflector::reflector(writer, watcher(api, labelled).default_backoff()).for_each(
        |event| async move {
            if let Err(error) = event {
                tracing::warn!(%error, "the cluster Secret watch was interrupted; retrying");
            }
        },
    );
    (store, watch)
}

/// Drops the registered clusters' caches once no app deploys there any
/// more (apps deleted are not reconciled, so they are looked for here).
async fn sweep_clusters(context: Arc<Context>, apps: reflector::Store<StoredApplication>) {
    loop {
        tokio::time::sleep(CLUSTER_SWEEP).await;
        context
            .clusters
            .sweep(|(namespace, name)| apps.get(&ObjectRef::new(name).within(namespace)).is_some())
            .await;
    }
}

/// How often apps that are gone are looked for.
const CLUSTER_SWEEP: Duration = Duration::from_secs(30);

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

/// What makes a change to an Application worth a reconcile: its spec (the
/// generation), annotations (sync requests), labels, finalizers, deletion
/// and identity — not its status, which the controller writes itself. A
/// status write must not wake the reconcile that wrote it: a failure whose
/// message differs each time (a flaky network's errors do) would otherwise
/// reconcile in a hot loop, as the fault suite's Git outage showed. The
/// cache still sees every change; only the trigger is filtered.
fn worth_reconciling(app: &StoredApplication) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let meta = kube::Resource::meta(app);
    let mut hasher = DefaultHasher::new();
    meta.uid.hash(&mut hasher);
    meta.generation.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    meta.labels.hash(&mut hasher);
    meta.finalizers.hash(&mut hasher);
    meta.deletion_timestamp.is_some().hash(&mut hasher);
    Some(hasher.finish())
}
