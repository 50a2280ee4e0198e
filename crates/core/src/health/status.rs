//! The health vocabulary: [`HealthStatus`] and [`Health`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Whether a resource works, from best to worst.
///
/// The order is the one used to fold many resources into one application
/// health (Argo CD's order): `Healthy < Suspended < Progressing < Missing <
/// Degraded < Unknown`, so `max` (or [`HealthStatus::worst`]) picks the
/// status that needs attention first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum HealthStatus {
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
    Unknown,
}

impl HealthStatus {
    /// Every status, from best to worst.
    pub const ALL: [HealthStatus; 6] = [
        HealthStatus::Healthy,
        HealthStatus::Suspended,
        HealthStatus::Progressing,
        HealthStatus::Missing,
        HealthStatus::Degraded,
        HealthStatus::Unknown,
    ];

    /// The worse of two statuses.
    pub fn worst(self, other: HealthStatus) -> HealthStatus {
        self.max(other)
    }

    /// The status as written in status fields, CLI output and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthStatus::Healthy => "Healthy",
            HealthStatus::Suspended => "Suspended",
            HealthStatus::Progressing => "Progressing",
            HealthStatus::Missing => "Missing",
            HealthStatus::Degraded => "Degraded",
            HealthStatus::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for HealthStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A word that is not a [`HealthStatus`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a health status (Healthy, Suspended, Progressing, Missing, Degraded, Unknown)"
)]
pub struct UnknownHealthStatus(pub String);

impl FromStr for HealthStatus {
    type Err = UnknownHealthStatus;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        HealthStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
            .ok_or_else(|| UnknownHealthStatus(text.to_string()))
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
