//! The health vocabulary: [`HealthStatus`] and [`Health`].

use std::fmt;

use serde::{Deserialize, Serialize};

crate::vocabulary! {
    /// Whether a resource works, from best to worst.
    ///
    /// The order is the one used to fold many resources into one application
    /// health (Argo CD's order): `Healthy < Suspended < Progressing < Missing <
    /// Degraded < Unknown`, so `max` (or [`HealthStatus::worst`]) picks the
    /// status that needs attention first.
    #[derive(Default)]
    pub enum HealthStatus("health status") {
        /// Working as intended.
        Healthy,
        /// Deliberately paused or not running (a suspended Job or CronJob, a
        /// paused Deployment).
        Suspended,
        /// Not yet working, but expected to get there (a rollout in progress).
        Progressing,
        /// Desired but absent from the cluster.
        Missing,
        /// Failing (a crash loop, a failed Job, a rollout past its deadline).
        Degraded,
        /// Could not be assessed (for example a health rule failed at run time).
        #[default]
        Unknown,
    }
}

impl HealthStatus {
    /// The worse of two statuses.
    pub fn worst(self, other: HealthStatus) -> HealthStatus {
        self.max(other)
    }
}

/// The health of one resource (or application): a status and one human
/// line that names the object, e.g. `Deployment web: 2/3 replicas
/// available, rollout in progress`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// The status.
    pub status: HealthStatus,
    /// One line for humans, naming the object first.
    pub message: String,
}

impl Health {
    /// A health with `status` and `message`.
    pub fn new(status: HealthStatus, message: impl Into<String>) -> Self {
        Health {
            status,
            message: message.into(),
        }
    }

    /// The health of a desired object that does not exist in the cluster;
    /// `object` names it (`Deployment shop/web`).
    pub fn missing(object: impl fmt::Display) -> Self {
        Health::new(
            HealthStatus::Missing,
            format!("{object}: missing from the cluster"),
        )
    }
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}
