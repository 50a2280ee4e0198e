//! What the API server serves (its version and API versions), discovered
//! and cached: renderers ask on every render, discovery answers rarely.
//!
//! [`discover`] asks once (two requests with aggregated discovery, which
//! every supported Kubernetes serves; one per group otherwise).
//! [`CachedCapabilities`] keeps the answer for a few minutes, so a new CRD
//! is seen within `max_age`, and many renders at once wait for one
//! discovery rather than making one each.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kube::Client;
use kube::discovery::Discovery;
use tether_core::capabilities::Capabilities;

use crate::ClusterError;

/// How long discovered capabilities are used before they are asked again.
pub const MAX_AGE: Duration = Duration::from_secs(180);

/// The API server's version and every group/version/kind it serves.
pub async fn discover(client: &Client) -> Result<Capabilities, ClusterError> {
    let version = client
        .apiserver_version()
        .await
        .map_err(ClusterError::Discovery)?;
    let discovery = match Discovery::new(client.clone()).run_aggregated().await {
        Ok(discovery) => discovery,
        // Older servers and some proxies: one request per group.
        Err(_) => Discovery::new(client.clone())
            .run()
            .await
            .map_err(ClusterError::Discovery)?,
    };
    let mut served = Vec::new();
    for group in discovery.groups() {
        for version in group.versions() {
            let resources = group.versioned_resources(version);
            let group_version = match group.name() {
                "" => version.to_string(),
                name => format!("{name}/{version}"),
            };
            let kinds = resources.into_iter().map(|(r, _)| r.kind).collect();
            served.push((group_version, kinds));
        }
    }
    Ok(Capabilities::from_discovery(
        &version.git_version,
        &version.major,
        &version.minor,
        served,
    ))
}

/// Discovered capabilities, kept for `max_age`. A discovery that fails
/// keeps the last answer (for another `max_age`); with none yet, the
/// error is returned, and retryable.
pub struct CachedCapabilities {
    client: Client,
    max_age: Duration,
    last: tokio::sync::Mutex<Option<(Instant, Arc<Capabilities>)>>,
    discoveries: AtomicU64,
}

impl CachedCapabilities {
    pub fn new(client: Client, max_age: Duration) -> Self {
        CachedCapabilities {
            client,
            max_age,
            last: tokio::sync::Mutex::new(None),
            discoveries: AtomicU64::new(0),
        }
    }

    /// The capabilities, discovered now if the last answer is older than
    /// `max_age` (callers at that moment wait for the same discovery).
    pub async fn get(&self) -> Result<Arc<Capabilities>, ClusterError> {
        let mut last = self.last.lock().await;
        if let Some((at, capabilities)) = last.as_ref()
            && at.elapsed() < self.max_age
        {
            return Ok(capabilities.clone());
        }
        self.discoveries.fetch_add(1, Ordering::Relaxed);
        match discover(&self.client).await {
            Ok(capabilities) => {
                let capabilities = Arc::new(capabilities);
                *last = Some((Instant::now(), capabilities.clone()));
                Ok(capabilities)
            }
            Err(error) => match last.take() {
                Some((_, capabilities)) => {
                    tracing::warn!(%error, "discovery failed; rendering with the last capabilities");
                    *last = Some((Instant::now(), capabilities.clone()));
                    Ok(capabilities)
                }
                None => Err(error),
            },
        }
    }

    /// Forgets the last answer if it does not list every group/version
    /// that the CustomResourceDefinitions among `objects` serve, so the
    /// next [`CachedCapabilities::get`] discovers again: a CRD that an
    /// application declares is seen by the next render after it is applied,
    /// not `max_age` later. Never discovers itself.
    pub async fn forget_unless_serving<'a>(
        &self,
        objects: impl IntoIterator<Item = &'a serde_json::Value>,
    ) {
        let mut last = self.last.lock().await;
        if let Some((_, capabilities)) = last.as_ref()
            && !capabilities.serve_all_crds(objects)
        {
            *last = None;
        }
    }

    /// Discoveries made so far.
    pub fn discoveries(&self) -> u64 {
        self.discoveries.load(Ordering::Relaxed)
    }
}
