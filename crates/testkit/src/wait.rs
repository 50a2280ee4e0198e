//! Waiting for the cluster (or the controller) to get somewhere.

use std::time::Duration;

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
