//! Application status writes, in two lanes.
//!
//! Most writes happen at once, inside the reconcile that computed them. A
//! write that only moves the recorded revision (a commit that changes none
//! of the app's objects, see [`crate::report::status::only_revision_moved`]) is
//! deferred to a background lane with [`DEFERRED_WRITERS`] writers. A push to
//! a repository of many apps then costs one quick reconcile per app, and the
//! app the push does change is not queued behind a status write for every
//! other one; under load, deferred writes of one app coalesce (the latest
//! wins).
//!
//! Per app, writes never land out of order: each write takes a sequence
//! number and the app's lock, and a deferred write older than what the app
//! last wrote is dropped. An immediate write (or a sync marking itself
//! Running) supersedes the app's pending deferred one. A deferred record
//! lost in a crash is recomputed by the next leader's first reconcile: it is
//! derived from Git and the last sync, not an audit record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource};
use tether_core::tracking::FIELD_MANAGER;
use tokio::sync::{Notify, OwnedMutexGuard};

use crate::api::{Application, ApplicationStatus};
use crate::observe::live::AppKey;

/// Background writers of deferred status: few, so that they leave the API
/// server to the reconciles that apply changes.
pub const DEFERRED_WRITERS: usize = 2;
/// Pause before a deferred write that failed is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// A status waiting in the deferred lane.
#[derive(Debug, Clone, PartialEq)]
pub struct Deferred {
    pub seq: u64,
    pub status: ApplicationStatus,
}

/// The bookkeeping of both lanes, without I/O: sequence numbers, the pending
/// deferred writes, and which of them is due first.
#[derive(Debug, Default)]
pub struct Lanes {
    next_seq: u64,
    pending: HashMap<AppKey, Deferred>,
}

impl Lanes {
    /// Queues `status` for `app`, replacing any deferred write it had.
    pub fn defer(&mut self, app: AppKey, status: ApplicationStatus) {
        let seq = self.seq();
        self.pending.insert(app, Deferred { seq, status });
    }

    /// A sequence number for an immediate write of `app`, dropping the
    /// deferred write it supersedes.
    pub fn supersede(&mut self, app: &AppKey) -> u64 {
        self.pending.remove(app);
        self.seq()
    }

    /// The oldest deferred write, taken out of the lane.
    pub fn take(&mut self) -> Option<(AppKey, Deferred)> {
        let app = self
            .pending
            .iter()
            .min_by_key(|(_, deferred)| deferred.seq)
            .map(|(app, _)| app.clone())?;
        let deferred = self.pending.remove(&app)?;
        Some((app, deferred))
    }

    /// Puts back a deferred write that failed, unless a newer one replaced it.
    pub fn retry(&mut self, app: AppKey, deferred: Deferred) {
        self.pending.entry(app).or_insert(deferred);
    }

    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }
}

/// Writes Application status through the status subresource, with server-side
/// apply as field manager `tether`.
pub struct StatusWrites {
    client: Client,
    lanes: Mutex<Lanes>,
    /// Per app, the sequence number of the last write sent.
    written: Mutex<HashMap<AppKey, Arc<tokio::sync::Mutex<u64>>>>,
    deferred: Notify,
}

impl StatusWrites {
    pub fn new(client: Client) -> Self {
        StatusWrites {
            client,
            lanes: Mutex::default(),
            written: Mutex::default(),
            deferred: Notify::new(),
        }
    }

    /// Writes `status` now.
    pub async fn write(&self, app: &AppKey, status: &ApplicationStatus) -> Result<(), kube::Error> {
        let _turn = self.exclusive(app).await;
        apply(&self.client, app, status).await
    }

    /// Writes `status` in the background, after the writes queued before it.
    pub fn defer(&self, app: &AppKey, status: ApplicationStatus) {
        self.lanes.lock().expect("lock").defer(app.clone(), status);
        self.deferred.notify_one();
    }

    /// The app's turn to write its status by other means (a merge patch):
    /// no deferred write of it lands until the guard is dropped, nor after.
    pub async fn exclusive(&self, app: &AppKey) -> OwnedMutexGuard<u64> {
        let seq = self.lanes.lock().expect("lock").supersede(app);
        let mut written = self.lock_of(app).lock_owned().await;
        *written = seq;
        written
    }

    /// The deferred lane's writers; runs until dropped.
    pub async fn run_deferred(&self) {
        let writers = (0..DEFERRED_WRITERS).map(|_| self.deferred_writer());
        futures::future::join_all(writers).await;
    }

    async fn deferred_writer(&self) {
        loop {
            let notified = self.deferred.notified();
            let next = self.lanes.lock().expect("lock").take();
            let Some((app, deferred)) = next else {
                notified.await;
                continue;
            };
            // Another writer may have work too.
            self.deferred.notify_one();
            let lock = self.lock_of(&app);
            let mut written = lock.lock().await;
            if *written > deferred.seq {
                continue;
            }
            match apply(&self.client, &app, &deferred.status).await {
                Ok(()) => *written = deferred.seq,
                Err(kube::Error::Api(response)) if response.code == 404 => {}
                Err(error) => {
                    drop(written);
                    tracing::warn!(app = %format!("{}/{}", app.0, app.1), %error,
                        "recording the revision failed; retrying");
                    self.lanes.lock().expect("lock").retry(app, deferred);
                    tokio::time::sleep(RETRY_AFTER).await;
                }
            }
        }
    }

    fn lock_of(&self, app: &AppKey) -> Arc<tokio::sync::Mutex<u64>> {
        self.written
            .lock()
            .expect("lock")
            .entry(app.clone())
            .or_default()
            .clone()
    }
}

async fn apply(
    client: &Client,
    (namespace, name): &AppKey,
    status: &ApplicationStatus,
) -> Result<(), kube::Error> {
    let api: Api<Application> = Api::namespaced(client.clone(), namespace);
    let patch = serde_json::json!({
        "apiVersion": Application::api_version(&()),
        "kind": Application::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(name: &str) -> AppKey {
        ("team".into(), name.into())
    }

    fn at(revision: &str) -> ApplicationStatus {
        let mut status = ApplicationStatus::default();
        status.sync.revision = Some(revision.into());
        status
    }

    #[test]
    fn deferred_writes_are_taken_oldest_first() {
        let mut lanes = Lanes::default();
        lanes.defer(app("b"), at("1"));
        lanes.defer(app("a"), at("1"));
        assert_eq!(lanes.take().map(|(app, _)| app), Some(app("b")));
        assert_eq!(lanes.take().map(|(app, _)| app), Some(app("a")));
        assert_eq!(lanes.take(), None);
    }

    #[test]
    fn a_later_deferred_write_of_an_app_replaces_its_earlier_one() {
        let mut lanes = Lanes::default();
        lanes.defer(app("a"), at("1"));
        lanes.defer(app("a"), at("2"));
        let (_, deferred) = lanes.take().unwrap();
        assert_eq!(deferred.status, at("2"));
        assert_eq!(lanes.take(), None);
    }

    #[test]
    fn an_immediate_write_drops_the_deferred_one_and_outranks_it() {
        let mut lanes = Lanes::default();
        lanes.defer(app("a"), at("1"));
        let taken = lanes.take().unwrap().1;
        lanes.defer(app("a"), at("2"));
        let immediate = lanes.supersede(&app("a"));
        assert_eq!(lanes.take(), None);
        assert!(immediate > taken.seq, "a write already taken loses to it");
    }

    #[test]
    fn a_failed_deferred_write_comes_back_unless_a_newer_one_replaced_it() {
        let mut lanes = Lanes::default();
        lanes.defer(app("a"), at("1"));
        let (key, failed) = lanes.take().unwrap();
        lanes.retry(key.clone(), failed.clone());
        assert_eq!(lanes.take().unwrap().1, failed);

        lanes.defer(app("a"), at("2"));
        lanes.retry(key, failed);
        assert_eq!(lanes.take().unwrap().1.status, at("2"));
    }
}
