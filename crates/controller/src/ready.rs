//! Whether a watched store has had its first list.

use kube::runtime::reflector::Store;

/// Whether a watched store has had its first list, as a `watch` channel,
/// which wakes every waiter. `Store::wait_until_ready` keeps a single
/// waker: when several reconciles wait on it at once, all but the last are
/// never woken (seen twice: see `live.rs`).
#[derive(Clone)]
pub struct Ready(tokio::sync::watch::Receiver<bool>);

impl Ready {
    /// Readiness of `store`, and the one future that waits for it; run that
    /// future exactly once, from one task.
    pub fn of<K>(store: Store<K>) -> (Ready, impl std::future::Future<Output = ()>)
    where
        K: kube::runtime::reflector::Lookup + Clone + 'static,
        K::DynamicType: Eq + std::hash::Hash + Clone,
    {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let waiter = async move {
            if store.wait_until_ready().await.is_ok() {
                tx.send_replace(true);
            }
            // Keep the sender: a dropped one would read as "never ready".
            std::future::pending::<()>().await;
        };
        (Ready(rx), waiter)
    }

    /// Readiness of every one of `stores` (see [`Ready::of`]).
    pub fn of_all<K>(stores: Vec<Store<K>>) -> (Ready, impl std::future::Future<Output = ()>)
    where
        K: kube::runtime::reflector::Lookup + Clone + 'static,
        K::DynamicType: Eq + std::hash::Hash + Clone,
    {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let waiter = async move {
            let lists = stores.iter().map(|store| store.wait_until_ready());
            if futures::future::join_all(lists)
                .await
                .iter()
                .all(Result::is_ok)
            {
                tx.send_replace(true);
            }
            std::future::pending::<()>().await;
        };
        (Ready(rx), waiter)
    }

    /// A store that will never be listed.
    pub fn never() -> Ready {
        Ready(tokio::sync::watch::channel(false).1)
    }

    /// Waits until the store has its first list; `false` if it never will.
    pub async fn wait(&self) -> bool {
        let mut rx = self.0.clone();
        rx.wait_for(|ready| *ready).await.is_ok()
    }
}
