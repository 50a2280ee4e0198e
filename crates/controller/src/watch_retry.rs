//! Every watch's retries: in place of kube's `default_backoff()` (client-go's
//! schedule for every failure), [`Retrying::retrying`] waits by
//! [`tether_core::watch_retry`], which tells an API server that answered
//! with an error from one that did not answer.

use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use tether_core::watch_retry::{WatchFailure, WatchRetry};

/// A watch stream that, after an error, waits before it is polled again.
pub trait Retrying<K>: Stream<Item = Result<K, watcher::Error>> + Sized + Send + 'static {
    /// Yields every event and error of the watch; after an error, the next
    /// poll first waits as [`WatchRetry`] says.
    fn retrying(self) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
    where
        K: Send + 'static,
    {
        let state = (Box::pin(self), WatchRetry::default(), None::<Duration>);
        futures::stream::unfold(state, |(mut watch, mut retry, wait)| async move {
            if let Some(wait) = wait {
                tokio::time::sleep(wait).await;
            }
            let item = watch.next().await?;
            let wait = match &item {
                Ok(_) => {
                    retry.succeeded();
                    None
                }
                Err(error) => Some(retry.failed(failure(error), jitter())),
            };
            Some((item, (watch, retry, wait)))
        })
    }
}

impl<S, K> Retrying<K> for S where S: Stream<Item = Result<K, watcher::Error>> + Send + 'static {}

/// Whether the API server answered: transport errors (refused, reset, a
/// stream cut mid-read) and a gateway's 502 or 504 say it did not; any
/// other status, a bad body or anything else says it did.
fn failure(error: &watcher::Error) -> WatchFailure {
    let client = match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => e,
        watcher::Error::WatchError(_) | watcher::Error::NoResourceVersion => {
            return WatchFailure::Answered;
        }
    };
    match client {
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
            WatchFailure::Unanswered
        }
        kube::Error::Api(status) if matches!(status.code, 502 | 504) => WatchFailure::Unanswered,
        _ => WatchFailure::Answered,
    }
}

/// A number in [0, 1) from the operating system's random source (0 if it
/// has none to give).
fn jitter() -> f64 {
    let bits = getrandom::u64().unwrap_or(0);
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_connection_or_a_gateway_error_is_unanswered_and_a_throttle_is_answered() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let unanswered = watcher::Error::WatchStartFailed(kube::Error::Service(refused.into()));
        assert_eq!(failure(&unanswered), WatchFailure::Unanswered);
        let cut = watcher::Error::WatchFailed(kube::Error::ReadEvents(
            std::io::ErrorKind::UnexpectedEof.into(),
        ));
        assert_eq!(failure(&cut), WatchFailure::Unanswered);
        let status =
            kube::core::Status::failure("too many requests", "TooManyRequests").with_code(429);
        let throttled = watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status)));
        assert_eq!(failure(&throttled), WatchFailure::Answered);
        let gateway = kube::core::Status::failure("bad gateway", "").with_code(502);
        let no_server = watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(gateway)));
        assert_eq!(failure(&no_server), WatchFailure::Unanswered);
    }

    #[test]
    fn jitter_is_a_fraction_of_one() {
        for _ in 0..100 {
            assert!((0.0..1.0).contains(&jitter()));
        }
    }
}
