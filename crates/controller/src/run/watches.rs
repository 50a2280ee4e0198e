//! What the controller watches besides Applications' own objects:
//! Applications (decoded one by one), Projects, repository and cluster
//! Secrets — each a cache and the future or stream that keeps it filled.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use tokio::sync::mpsc;

use crate::api::{Project, StoredApplication};
use crate::context::{Config, Context};
use crate::credentials;
use crate::observe::live::AppKey;
use crate::serve::probe::Probe;
use crate::watch_retry::Retrying;
use tether_cluster::remote::CLUSTER_LABEL;

/// The API of `K` in the watched namespace, else in every namespace.
pub(super) fn watched<K>(client: &Client, config: &Config) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match &config.watch_namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// Applications decode one by one into `writer`'s cache (a malformed one
/// cannot stop the list), and the watch tells `probe` whether it works.
/// Apps waiting for one whose sync or health moved are woken; a status
/// this controller wrote, once cached, is not kept a second time. Only
/// changes [`worth_reconciling`] come out.
pub(super) fn applications(
    api: Api<StoredApplication>,
    (store, writer): (
        Store<StoredApplication>,
        reflector::store::Writer<StoredApplication>,
    ),
    probe: Probe,
    wake: mpsc::UnboundedSender<AppKey>,
    context: Arc<Context>,
) -> impl Stream<Item = Result<StoredApplication, watcher::Error>> + Send + use<> {
    reflector::reflector(
        writer,
        watcher(api, watcher::Config::default())
            .retrying()
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
    .inspect({
        let waker = crate::reconcile::dependencies::Waker::default();
        move |app| {
            if let Ok(app) = app {
                waker.arrived(app, &store, &wake);
                context.cache_saw(app);
            }
        }
    })
    .predicate_filter(worth_reconciling, Default::default())
}

/// The apps woken through `wakes` (a dependency moved, a push arrived, a
/// registered cluster answered again), as the controller's triggers.
pub(super) fn woken(
    wakes: mpsc::UnboundedReceiver<AppKey>,
) -> impl Stream<Item = ObjectRef<StoredApplication>> + Send + use<> {
    futures::stream::unfold(wakes, |mut rx| async move {
        let (namespace, name) = rx.recv().await?;
        Some((
            ObjectRef::<StoredApplication>::new(&name).within(&namespace),
            rx,
        ))
    })
}

/// The Projects, and a stream that says when one changed (every app is
/// judged again then).
pub(super) fn watch_projects(
    client: &Client,
) -> (Store<Project>, impl Stream<Item = ()> + Send + use<>) {
    let (projects, writer) = reflector::store();
    let changes = reflector::reflector(
        writer,
        watcher(
            Api::<Project>::all(client.clone()),
            watcher::Config::default(),
        )
        .retrying(),
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
    (projects, changes)
}

/// The repository-credential Secrets (labelled as such) in the watched
/// namespace, else each of `secrets_namespaces`, else every namespace; and
/// the future that keeps them watched.
pub(super) fn watch_repository_secrets(
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
        let watch = reflector::reflector(writer, watcher(api, labelled.clone()).retrying())
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
pub(super) fn watch_cluster_secrets(
    client: &Client,
    config: &Config,
) -> (
    reflector::Store<Secret>,
    impl std::future::Future<Output = ()> + use<>,
) {
    let api: Api<Secret> = Api::namespaced(client.clone(), &config.lease_namespace);
    let labelled = watcher::Config::default().labels(&format!("{CLUSTER_LABEL}=true"));
    let (store, writer) = reflector::store();
    let watch = reflector::reflector(writer, watcher(api, labelled).retrying()).for_each(
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
pub(super) async fn sweep_clusters(context: Arc<Context>, apps: Store<StoredApplication>) {
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
