//! Waiting between sync waves: with `syncPolicy.waitForWaves`, a sync
//! applies wave N+1 only once every object of wave N is healthy.
//!
//! Health is judged exactly as status judges it (the Application's health
//! rules over the shipped ones), on live objects from the watch caches, so
//! waiting costs no API request: the gate looks again whenever a watch
//! reports a change. It holds the reconcile's worker for at most
//! [`WAVE_HOLD`]; a wave that takes longer ends the pass with
//! [`SyncError::Waiting`] (the status says so, and the next reconcile, woken
//! by the objects' changes or a timer, resumes the sync where it was), and
//! the sync gives up `waveTimeoutSeconds` after the wait began, naming the
//! object that held the wave back.

use std::time::{Duration, SystemTime};

use serde_json::Value;
use tether_cluster::Resources;
use tether_core::ObjectRef;
use tether_core::health::{Health, HealthStatus};

use super::SyncError;
use crate::observe::health::Judge;
use crate::observe::live::LiveCache;
use crate::observe::memo::AppliedObject;

/// The longest a sync holds its worker waiting for one wave; then it
/// yields and resumes at a later reconcile.
pub const WAVE_HOLD: Duration = Duration::from_secs(2);

/// Waits for a wave's objects to be healthy before the next wave.
pub struct WaveGate<'a> {
    pub live: &'a LiveCache,
    pub judge: &'a Judge,
    pub resources: &'a Resources,
    /// How long one wave may take to become healthy.
    pub timeout: Duration,
    /// The wait an earlier pass of this sync left off at: its wave, and
    /// when the wait began.
    pub resumed: Option<(i32, SystemTime)>,
}

impl WaveGate<'_> {
    /// Returns once every object of wave `wave` (as just applied) is
    /// healthy. Fails with [`SyncError::Waiting`] when it is not after
    /// [`WAVE_HOLD`], and with [`SyncError::Unhealthy`], naming the first
    /// object that is not, once the timeout since the wait began is over.
    pub async fn wait(&self, wave: i32, applied: &[AppliedObject]) -> Result<(), SyncError> {
        let since = match self.resumed {
            Some((resumed, since)) if resumed == wave => since,
            _ => SystemTime::now(),
        };
        let left = (since + self.timeout)
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let mut changes = self.live.changes();
        let hold = tokio::time::Instant::now() + left.min(WAVE_HOLD);
        loop {
            changes.borrow_and_update();
            let observed = self.observe(applied).await?;
            let Some((object, message)) = blocking(&observed) else {
                return Ok(());
            };
            let woken = tokio::time::timeout_at(hold, changes.changed()).await;
            if matches!(woken, Ok(Ok(()))) {
                continue;
            }
            if left <= WAVE_HOLD {
                return Err(SyncError::Unhealthy {
                    object: object.clone(),
                    wave,
                    waited: self.timeout,
                    message,
                });
            }
            return Err(SyncError::Waiting {
                object: object.clone(),
                wave,
                message,
                since,
                applied: Vec::new(),
            });
        }
    }

    /// The health of each applied object as the watch caches see it now.
    async fn observe(
        &self,
        applied: &[AppliedObject],
    ) -> Result<Vec<(ObjectRef, Option<Health>)>, SyncError> {
        let mut observed = Vec::with_capacity(applied.len());
        for object in applied {
            let served = self
                .resources
                .resolve(&object.id, &object.sent)
                .await
                .map_err(SyncError::Apply)?;
            let live = self
                .live
                .get(&served, &object.id)
                .await
                .and_then(|live| serde_json::to_value(&*live).ok());
            let health = match live {
                Some(live) if generation(&live) < generation(&object.live) => Some(Health::new(
                    HealthStatus::Progressing,
                    format!("{}: the applied change is not observed yet", object.id),
                )),
                Some(live) => self.judge.assess(&live),
                None => Some(Health::new(
                    HealthStatus::Missing,
                    format!("{}: not observed yet", object.id),
                )),
            };
            observed.push((object.id.clone(), health));
        }
        Ok(observed)
    }
}

/// The first object that keeps its wave from being done, with its health
/// message; `None` when the wave is done. Healthy and Suspended objects
/// are done (a suspended object is as far as it will go, as in Argo CD),
/// and so are objects no health check applies to (`None`).
pub fn blocking(observed: &[(ObjectRef, Option<Health>)]) -> Option<(&ObjectRef, String)> {
    observed.iter().find_map(|(id, health)| match health {
        Some(health)
            if !matches!(
                health.status,
                HealthStatus::Healthy | HealthStatus::Suspended
            ) =>
        {
            Some((id, format!("{}: {}", health.status, health.message)))
        }
        _ => None,
    })
}

fn generation(object: &Value) -> i64 {
    object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> ObjectRef {
        ObjectRef {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: name.into(),
        }
    }

    fn health(status: HealthStatus, message: &str) -> Option<Health> {
        Some(Health::new(status, message))
    }

    #[test]
    fn a_wave_is_done_when_every_object_is_healthy_suspended_or_unchecked() {
        let observed = [
            (id("a"), health(HealthStatus::Healthy, "")),
            (id("b"), health(HealthStatus::Suspended, "paused")),
            (id("c"), None),
        ];
        assert_eq!(blocking(&observed), None);
    }

    #[test]
    fn the_first_unhealthy_object_blocks_the_wave_with_its_message() {
        let observed = [
            (id("a"), health(HealthStatus::Healthy, "")),
            (
                id("b"),
                health(HealthStatus::Progressing, "0/1 replicas ready"),
            ),
            (id("c"), health(HealthStatus::Degraded, "crashing")),
        ];
        let (object, message) = blocking(&observed).unwrap();
        assert_eq!(object.name, "b");
        assert_eq!(message, "Progressing: 0/1 replicas ready");
    }
}
