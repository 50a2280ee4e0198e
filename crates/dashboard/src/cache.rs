//! The one watch every browser is served from: a reflector on the
//! Applications, with the user's own credentials, and a broadcast of its
//! changes. Browsers never reach the API server; a hundred open pages
//! cost the cluster one watch.

use std::future::Future;

use futures::StreamExt;
use kube::api::{Api, ListParams};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use tether_controller::api::{BreakGlass, StoredApplication};
use tokio::sync::broadcast;

/// The Applications as last seen, and a channel that says when they change.
#[derive(Clone)]
pub struct Cache {
    pub store: Store<StoredApplication>,
    pub changes: broadcast::Sender<()>,
    /// `namespace shop` or `all namespaces`, for the page.
    pub scope: String,
    /// The namespace watched, or `None` for all.
    pub namespace: Option<String>,
}

/// Why the watch could not start.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error(
        "listing Applications in all namespaces is forbidden for your kubeconfig's user \
         (the dashboard acts as you): {0}; pass -n NAMESPACE to watch one namespace"
    )]
    ClusterWideForbidden(String),
    #[error("Applications in {scope}: {source}")]
    List {
        scope: String,
        #[source]
        source: kube::Error,
    },
}

/// Starts watching the Applications of `namespace` (all when none) as
/// `client`'s user: a cache, and the future that keeps it filled, to be
/// spawned. Fails first, with a clear reason, when the user may not list
/// them.
pub async fn watch(
    client: kube::Client,
    namespace: Option<&str>,
) -> Result<(Cache, impl Future<Output = ()> + Send + 'static), CacheError> {
    let windows = windows_watch(&client, namespace).await;
    let (api, scope): (Api<StoredApplication>, String) = match namespace {
        Some(namespace) => (
            Api::namespaced(client, namespace),
            format!("namespace {namespace}"),
        ),
        None => (Api::all(client), "all namespaces".to_string()),
    };
    // Check the access once, so a refusal is said now, not retried silently.
    if let Err(source) = api.list(&ListParams::default().limit(1)).await {
        return Err(match source {
            kube::Error::Api(status) if status.code == 403 && namespace.is_none() => {
                CacheError::ClusterWideForbidden(status.message.clone())
            }
            source => CacheError::List { scope, source },
        });
    }
    let (store, writer) = reflector::store();
    let (changes, _) = broadcast::channel(16);
    let sender = changes.clone();
    let shown = scope.clone();
    let told = changes.clone();
    let filling = async move {
        if let Some(windows) = windows {
            tokio::spawn(tell_window_changes(windows, told));
        }
        let watched = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(StoredApplication::forget_managed_fields);
        let events = reflector::reflector(writer, watched);
        events
            .for_each(|event| {
                match event {
                    // A browser refetches once the first list is complete
                    // and on each change after it, not per listed item.
                    Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone) => {
                        let _ = sender.send(());
                    }
                    Ok(Event::Init | Event::InitApply(_)) => {}
                    Err(error) => tracing::warn!("watching Applications in {shown}: {error}"),
                }
                futures::future::ready(())
            })
            .await;
    };
    Ok((
        Cache {
            store,
            changes,
            scope,
            namespace: namespace.map(str::to_string),
        },
        filling,
    ))
}

/// The BreakGlass windows of `namespace` (all when none) as `client`'s
/// user, when they may list them: their pages are live too.
async fn windows_watch(
    client: &kube::Client,
    namespace: Option<&str>,
) -> Option<Api<PartialObjectMeta<BreakGlass>>> {
    let api: Api<PartialObjectMeta<BreakGlass>> = match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    };
    match api.list(&ListParams::default().limit(1)).await {
        Ok(_) => Some(api),
        Err(error) => {
            tracing::info!("break-glass pages will not update live: listing BreakGlass: {error}");
            None
        }
    }
}

/// Tells the browsers of every change of a window (metadata is enough:
/// the pages read windows themselves). A window's records change without
/// its Application changing.
async fn tell_window_changes(
    api: Api<PartialObjectMeta<BreakGlass>>,
    changes: broadcast::Sender<()>,
) {
    watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .for_each(|event| {
            match event {
                Ok(Event::Apply(_) | Event::Delete(_)) => {
                    let _ = changes.send(());
                }
                Ok(_) => {}
                Err(error) => tracing::warn!("watching BreakGlass windows: {error}"),
            }
            futures::future::ready(())
        })
        .await;
}
