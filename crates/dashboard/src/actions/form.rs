//! The actions' forms as posted, and their checks before anything is
//! asked of the API server: pure, so a refused form changes nothing.

use std::time::Duration;

use serde::Deserialize;
use tether_controller::api::break_glass::{Resolution, ScopedResource};
use tether_controller::break_glass::request::{RequestError, parse_resource};
use tether_core::window::{TtlError, TtlTooLong, parse_ttl, within_cap};

/// The longest window the dashboard asks for: `tether break-glass`'s
/// default `--max-ttl` (the controller's default `--max-break-glass-ttl`).
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// A window's time to live when the form leaves it empty, as the CLI's.
pub const DEFAULT_TTL: &str = "1h";

/// Every action's form: its CSRF token and the fields some actions have.
#[derive(Debug, Default, Deserialize)]
pub struct Posted {
    pub token: Option<String>,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub scope: String,
    #[serde(default)]
    pub duration: String,
    #[serde(default)]
    pub resolve: String,
}

/// Why a form was refused; nothing was asked of the API server.
#[derive(Debug, thiserror::Error)]
pub enum FormError {
    #[error("a break-glass window needs a reason (an incident reference such as `INC-1234: …`)")]
    NoReason,
    #[error("scope line {line}: {source}")]
    Scope {
        line: usize,
        #[source]
        source: RequestError,
    },
    #[error("duration: {0}")]
    Duration(#[from] TtlError),
    #[error("duration: {0}")]
    TooLong(#[from] TtlTooLong),
    #[error("resolve: expected `revert` or `adopt`, got {0:?}")]
    Resolve(String),
}

/// A window to open or extend, as the form asks for it.
#[derive(Debug, PartialEq)]
pub struct Window {
    pub reason: String,
    /// Empty: the whole app.
    pub resources: Vec<ScopedResource>,
    pub ttl: Duration,
}

impl Posted {
    /// The window this form opens: a reason, the scope (one `Kind/name`
    /// per line, none for the whole app) and a duration (default 1h, at
    /// most [`MAX_TTL`]).
    pub fn window(&self) -> Result<Window, FormError> {
        let reason = self.reason.trim();
        if reason.is_empty() {
            return Err(FormError::NoReason);
        }
        let mut resources = Vec::new();
        for (index, line) in self.scope.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let resource = parse_resource(line).map_err(|source| FormError::Scope {
                line: index + 1,
                source,
            })?;
            resources.push(resource);
        }
        Ok(Window {
            reason: reason.to_string(),
            resources,
            ttl: self.ttl()?,
        })
    }

    /// The form's duration, [`DEFAULT_TTL`] when empty, within [`MAX_TTL`].
    pub fn ttl(&self) -> Result<Duration, FormError> {
        let text = match self.duration.trim() {
            "" => DEFAULT_TTL,
            text => text,
        };
        Ok(within_cap(parse_ttl(text)?, MAX_TTL)?)
    }

    /// How a window is closed: `revert` (the default) or `adopt`.
    pub fn resolution(&self) -> Result<Resolution, FormError> {
        match self.resolve.trim() {
            "" => Ok(Resolution::Revert),
            word => word
                .parse()
                .map_err(|_| FormError::Resolve(word.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn posted(reason: &str, scope: &str, duration: &str) -> Posted {
        Posted {
            reason: reason.into(),
            scope: scope.into(),
            duration: duration.into(),
            ..Posted::default()
        }
    }

    #[test]
    fn a_window_needs_a_reason_that_is_more_than_blanks() {
        assert!(matches!(
            posted("  \n", "", "").window(),
            Err(FormError::NoReason)
        ));
    }

    #[test]
    fn the_scope_is_one_kind_and_name_per_line_and_empty_means_the_whole_app() {
        let window = posted(
            "INC-1: 500s",
            "Deployment/web\n\n ConfigMap/settings \r\n",
            "",
        )
        .window()
        .unwrap();
        let names: Vec<_> = window
            .resources
            .iter()
            .map(|r| format!("{}/{}", r.kind, r.name))
            .collect();
        assert_eq!(names, ["Deployment/web", "ConfigMap/settings"]);
        assert!(
            posted("INC-1", "", "")
                .window()
                .unwrap()
                .resources
                .is_empty()
        );
        let error = posted("INC-1", "Deployment/web\nweb", "")
            .window()
            .unwrap_err();
        assert!(error.to_string().starts_with("scope line 2:"), "{error}");
    }

    #[test]
    fn the_duration_defaults_to_an_hour_and_is_capped_at_a_day() {
        let ttl = |text: &str| posted("INC-1", "", text).ttl();
        assert_eq!(ttl("").unwrap(), Duration::from_secs(3600));
        assert_eq!(ttl("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(ttl("24h").unwrap(), MAX_TTL);
        assert!(matches!(ttl("25h"), Err(FormError::TooLong(_))));
        assert!(matches!(ttl("soon"), Err(FormError::Duration(_))));
    }

    #[test]
    fn a_window_is_closed_by_revert_unless_adopt_is_asked() {
        let resolve = |text: &str| Posted {
            resolve: text.into(),
            ..Posted::default()
        };
        assert_eq!(resolve("").resolution().unwrap(), Resolution::Revert);
        assert_eq!(resolve("adopt").resolution().unwrap(), Resolution::Adopt);
        assert!(resolve("delete").resolution().is_err());
    }
}
