//! Waiting for the cluster (or the controller) to get somewhere.

use std::fmt::Debug;
use std::time::Duration;

use kube::Api;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How long a test waits for anything before it fails.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Polls `check` every 100 ms until it returns a value; panics after
/// [`PATIENCE`] naming `what`, with the controller's last log lines when
/// this process runs one.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() >= deadline {
            match crate::log::tail_if_logging(40) {
                Some(tail) => {
                    panic!("timed out waiting for {what}; the controller's last log lines:\n{tail}")
                }
                None => panic!("timed out waiting for {what}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Object `name` from `api` once `check` holds; panics after [`PATIENCE`]
/// naming `what`, with the object as last seen and the controller's last
/// log lines.
pub async fn object_where<K>(api: &Api<K>, name: &str, what: &str, check: impl Fn(&K) -> bool) -> K
where
    K: Clone + DeserializeOwned + Serialize + Debug,
{
    let last = std::sync::Mutex::new(None);
    let found = tokio::time::timeout(
        PATIENCE,
        eventually(what, || async {
            let object = api.get(name).await.ok()?;
            *last.lock().expect("lock") = Some(object.clone());
            check(&object).then_some(object)
        }),
    )
    .await;
    found.unwrap_or_else(|_| {
        panic!(
            "timed out waiting for {name}: {what}; last seen: {}\nthe controller's last log lines:\n{}",
            serde_json::to_string_pretty(&*last.lock().expect("lock")).expect("serializable"),
            crate::log_tail("", 40)
        )
    })
}
