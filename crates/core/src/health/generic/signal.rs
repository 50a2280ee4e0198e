//! What one field of a status says, and how many such sayings become one
//! verdict.

use super::super::HealthStatus;
use super::words::Meaning;

/// How much a signal weighs, heaviest first: the heaviest signal present
/// decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Weight {
    /// The user paused it (`spec.paused`, a `Paused` condition): a paused
    /// object is not expected to converge, whatever else it says.
    Paused,
    /// A failure the operator names (`UpdateFailed`, `Stalled` True).
    Failure,
    /// Work underway, or a spec not yet observed.
    Underway,
    /// The summary condition False and its reason says why
    /// (`Available` False, `NoPodReady`).
    Withheld,
    /// Fewer replicas than desired, with no condition saying why.
    Shortfall,
    /// The summary condition (`Ready`, `Available`, …) True.
    Summary,
    /// A lesser condition short of good news (`Synced` False,
    /// `PartiallyReady` True, `HEALTH_WARN`).
    Lacking,
    /// The operator says it does not know (`Inconclusive`).
    Undecided,
    /// Good news from a lesser field (`status.phase = Running`).
    Good,
    /// Only that nothing failed (`ErrorOccurred` False): no evidence that
    /// it works.
    Clear,
}

impl Weight {
    /// The weight of a status word's meaning.
    pub fn of(meaning: Meaning) -> Weight {
        match meaning {
            Meaning::Failure => Weight::Failure,
            Meaning::Paused => Weight::Paused,
            Meaning::Underway => Weight::Underway,
            Meaning::Lacking => Weight::Lacking,
            Meaning::Undecided => Weight::Undecided,
            Meaning::Good => Weight::Good,
        }
    }

    /// The health a decisive signal of this weight gives.
    pub fn status(self) -> HealthStatus {
        match self {
            Weight::Paused => HealthStatus::Suspended,
            Weight::Failure | Weight::Withheld | Weight::Lacking => HealthStatus::Degraded,
            Weight::Underway | Weight::Shortfall => HealthStatus::Progressing,
            Weight::Summary | Weight::Good => HealthStatus::Healthy,
            Weight::Undecided | Weight::Clear => HealthStatus::Unknown,
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Weight::Paused => "paused",
            Weight::Failure => "failure",
            Weight::Underway => "in progress",
            Weight::Withheld => "not ready",
            Weight::Shortfall => "short",
            Weight::Summary => "ready",
            Weight::Lacking => "short of good",
            Weight::Undecided => "undecided",
            Weight::Good => "good",
            Weight::Clear => "nothing failed",
        }
    }
}

/// One thing the object says about itself: `status.phase = Failed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    pub weight: Weight,
    /// The field and its value, as a user would look them up:
    /// `status.conditions[Ready] = False (NotReady)`.
    pub said: String,
    /// The operator's own words, if any (a condition's message).
    pub message: String,
}

impl Signal {
    pub fn new(weight: Weight, said: impl Into<String>) -> Self {
        Signal {
            weight,
            said: said.into(),
            message: String::new(),
        }
    }

    pub fn with_message(mut self, message: &str) -> Self {
        self.message = message.to_string();
        self
    }

    /// `said: message`, or just `said`.
    pub fn text(&self) -> String {
        if self.message.is_empty() {
            self.said.clone()
        } else {
            format!("{}: {}", self.said, self.message)
        }
    }

    /// One line of an explanation: `failure  status.phase = Failed`.
    pub fn explain(&self) -> String {
        format!("{:<14} {}", self.describe_weight(), self.text())
    }

    fn describe_weight(&self) -> &'static str {
        self.weight.describe()
    }
}
