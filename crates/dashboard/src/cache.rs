//! The one watch every browser is served from: a reflector on the
//! Applications, with the user's own credentials, and a broadcast of its
//! changes. Browsers never reach the API server; a hundred open pages
//! cost the cluster one watch.
//!
//! The watch starts with the first request that needs the Applications
//! ([`Cache::apps`], [`Cache::subscribe`]), which waits for its first
//! complete list. In the controller it is dropped again after
//! [`IDLE_LIMIT`] without a request and without an open change stream
//! ([`Keep::WhileUsed`]), so a dashboard nobody looks at holds no copy of
//! the Applications; the next request starts it again.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::api::{Api, ListParams};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::watcher::{self, Event};
use tether_controller::api::{BreakGlass, StoredApplication};
use tether_controller::watch_retry::Retrying;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long the controller's dashboard keeps its watch once nobody uses
/// it: no request and no open change stream.
pub const IDLE_LIMIT: Duration = Duration::from_secs(10 * 60);

/// How long the watch lives once started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Until the dashboard stops (`tether dashboard`, one user's own).
    Always,
    /// Until this long passes without a request and without an open
    /// change stream (the controller's `/ui`).
    WhileUsed(Duration),
}

/// The Applications as last seen, and a channel that says when they
/// change. Clones share one watch.
#[derive(Clone)]
pub struct Cache {
    inner: Arc<Inner>,
    /// `namespace shop` or `all namespaces`, for the page.
    pub scope: String,
    /// The namespace watched, or `None` for all.
    pub namespace: Option<String>,
}

/// Fills a fresh store and tells `changes` of each change, until dropped.
type Fill = Box<
    dyn Fn(Writer<StoredApplication>, broadcast::Sender<()>) -> BoxFuture<'static, ()>
        + Send
        + Sync,
>;

struct Inner {
    fill: Fill,
    keep: Keep,
    /// Outlives the watches: a change stream stays open across them.
    changes: broadcast::Sender<()>,
    running: Mutex<Option<Running>>,
}

/// A watch started, and when it was last used.
struct Running {
    store: Store<StoredApplication>,
    task: JoinHandle<()>,
    used: Instant,
}

/// Why the watch could not start.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error(
        "listing Applications in all namespaces is forbidden for your kubeconfig's user \
         (the dashboard acts as you): {0}; pass -n NAMESPACE to watch one namespace"
    )]
    ClusterWideForbidden(String),
    #[error("Applications in {scope}: {}", tether_cluster::error::describe(.source))]
    List {
        scope: String,
        #[source]
        source: kube::Error,
    },
}

/// A cache of the Applications of `namespace` (all when none) as
/// `client`'s user, watched from its first use as `keep` says. Fails
/// first, with a clear reason, when the user may not list them.
pub async fn watch(
    client: kube::Client,
    namespace: Option<&str>,
    keep: Keep,
) -> Result<Cache, CacheError> {
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
    let shown = scope.clone();
    let fill: Fill = Box::new(move |writer, changes| {
        let windows = windows
            .clone()
            .map(|windows| tell_window_changes(windows, changes.clone()));
        let apps = tell_app_changes(api.clone(), writer, changes, shown.clone());
        Box::pin(async move {
            match windows {
                Some(windows) => {
                    futures::future::join(apps, windows).await;
                }
                None => apps.await,
            }
        })
    });
    Ok(Cache::new(fill, keep, scope, namespace.map(str::to_string)))
}

impl Cache {
    fn new(fill: Fill, keep: Keep, scope: String, namespace: Option<String>) -> Cache {
        let (changes, _) = broadcast::channel(16);
        Cache {
            inner: Arc::new(Inner {
                fill,
                keep,
                changes,
                running: Mutex::default(),
            }),
            scope,
            namespace,
        }
    }

    /// The Applications, once their first list is complete: starts the
    /// watch if it is not running, and counts as a use.
    pub async fn apps(&self) -> Store<StoredApplication> {
        let store = {
            let mut running = self.inner.running();
            let running = running.get_or_insert_with(|| self.start());
            running.used = Instant::now();
            running.store.clone()
        };
        // A store whose watch was dropped meanwhile still holds its list.
        let _ = store.wait_until_ready().await;
        store
    }

    /// A receiver told of every change of the Applications, once their
    /// first list is complete; the watch runs while it is open.
    pub async fn subscribe(&self) -> broadcast::Receiver<()> {
        let changes = self.inner.changes.subscribe();
        self.apps().await;
        changes
    }

    /// Whether the watch is running (its store held).
    pub fn watching(&self) -> bool {
        self.inner.running().is_some()
    }

    fn start(&self) -> Running {
        let (store, writer) = reflector::store();
        let filling = (self.inner.fill)(writer, self.inner.changes.clone());
        let task = match self.inner.keep {
            Keep::Always => tokio::spawn(filling),
            Keep::WhileUsed(limit) => {
                tokio::spawn(until_idle(filling, Arc::downgrade(&self.inner), limit))
            }
        };
        Running {
            store,
            task,
            used: Instant::now(),
        }
    }
}

impl Inner {
    fn running(&self) -> MutexGuard<'_, Option<Running>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops the watch when it has not been used for `limit`, or says
    /// when to look again. An open change stream is a use, seen every
    /// tenth of `limit`: the watch outlives the last one by about `limit`.
    fn drop_if_idle(&self, limit: Duration) -> Option<Instant> {
        let mut running = self.running();
        let now = Instant::now();
        let watch = running.as_mut()?;
        if self.changes.receiver_count() > 0 {
            watch.used = now;
            return Some(now + limit / 10);
        }
        let until = watch.used + limit;
        if now < until {
            return Some(until);
        }
        *running = None;
        None
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(watch) = self.running().take() {
            watch.task.abort();
        }
    }
}

/// Runs `filling` until the watch of `inner` is dropped for being idle
/// `limit` long (or the cache itself is dropped).
async fn until_idle(filling: BoxFuture<'static, ()>, inner: Weak<Inner>, limit: Duration) {
    let idle = async {
        while let Some(until) = inner.upgrade().and_then(|inner| inner.drop_if_idle(limit)) {
            tokio::time::sleep_until(until).await;
        }
    };
    tokio::select! {
        () = filling => {}
        () = idle => {}
    }
}

/// Fills `writer` from a watch of `api`, telling `changes` once the
/// first list is complete and on each change after it.
async fn tell_app_changes(
    api: Api<StoredApplication>,
    writer: Writer<StoredApplication>,
    changes: broadcast::Sender<()>,
    scope: String,
) {
    let watched = watcher::watcher(api, watcher::Config::default())
        .retrying()
        .modify(StoredApplication::forget_managed_fields);
    reflector::reflector(writer, watched)
        .for_each(|event| {
            match event {
                // A browser refetches once the first list is complete
                // and on each change after it, not per listed item.
                Ok(Event::Apply(_) | Event::Delete(_) | Event::InitDone) => {
                    let _ = changes.send(());
                }
                Ok(Event::Init | Event::InitApply(_)) => {}
                Err(error) => tracing::warn!("watching Applications in {scope}: {error}"),
            }
            futures::future::ready(())
        })
        .await;
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
        .retrying()
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A cache whose watch lists `apps`, then waits; `keep` as given.
    pub(crate) fn listing(apps: Vec<StoredApplication>, keep: Keep) -> Cache {
        let fill: Fill = Box::new(move |mut writer, changes| {
            writer.apply_watcher_event(&Event::Init);
            for app in &apps {
                writer.apply_watcher_event(&Event::InitApply(app.clone()));
            }
            writer.apply_watcher_event(&Event::InitDone);
            let _ = changes.send(());
            Box::pin(async move {
                let _writer = writer;
                std::future::pending().await
            })
        });
        let namespace = Some("shop".to_string());
        Cache::new(fill, keep, "namespace shop".to_string(), namespace)
    }

    impl Cache {
        /// Tells the change streams of a change, as the watch would.
        pub(crate) fn tell(&self) {
            let _ = self.inner.changes.send(());
        }
    }

    /// Application `name` of namespace `shop`, Converged unless it is
    /// `broken`.
    pub(crate) fn stored(name: &str) -> StoredApplication {
        let (sync, health, state) = match name {
            "broken" => ("OutOfSync", "Degraded", "Broken"),
            _ => ("Synced", "Healthy", "Converged"),
        };
        StoredApplication::decode(&serde_json::json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"source": {"repoURL": "file:///srv/git/shop.git"},
                     "destination": {"namespace": "shop"}},
            "status": {"sync": {"status": sync, "revision": "abc123"},
                       "health": {"status": health}, "state": state,
                       "project": "default"}
        }))
    }

    #[tokio::test(start_paused = true)]
    async fn the_watch_runs_from_the_first_use_until_idle_and_starts_again() {
        let limit = Duration::from_secs(60);
        let cache = listing(vec![stored("web")], Keep::WhileUsed(limit));
        assert!(!cache.watching(), "no watch before the first request");

        assert_eq!(cache.apps().await.len(), 1, "the first list is waited for");
        assert!(cache.watching());
        tokio::time::sleep(limit / 2).await;
        cache.apps().await;
        tokio::time::sleep(limit * 3 / 4).await;
        assert!(cache.watching(), "a use restarts the idle time");
        tokio::time::sleep(limit / 2).await;
        assert!(!cache.watching(), "dropped after the idle limit");

        assert_eq!(
            cache.apps().await.len(),
            1,
            "the next request starts it again"
        );
        assert!(cache.watching());
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_change_stream_keeps_the_watch_until_the_idle_limit_after_it() {
        let limit = Duration::from_secs(60);
        let cache = listing(vec![stored("web")], Keep::WhileUsed(limit));
        let stream = cache.subscribe().await;
        assert!(cache.watching());
        tokio::time::sleep(limit * 5 + Duration::from_secs(1)).await;
        assert!(cache.watching(), "an open change stream is a use");
        drop(stream);
        tokio::time::sleep(limit * 3 / 4).await;
        assert!(
            cache.watching(),
            "the idle time counts from the stream's end"
        );
        tokio::time::sleep(limit / 2).await;
        assert!(!cache.watching());
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_watch_is_never_dropped() {
        let cache = listing(vec![], Keep::Always);
        cache.apps().await;
        tokio::time::sleep(IDLE_LIMIT * 3).await;
        assert!(cache.watching());
    }
}
