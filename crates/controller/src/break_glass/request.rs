//! Opening, extending and closing a window as an operator does (`tether
//! break-glass …`). The operator's identity comes from a SelfSubjectReview:
//! the API server says who the caller is, and the admission policy
//! `tether install` adds refuses a window whose `openedBy` (or an
//! extension's or closing's `by`) is anyone else.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::{Client, ResourceExt};
use serde_json::json;
use tether_core::window::{TtlTooLong, WindowPhase, is_privileged_group, within_cap};

use crate::api::break_glass::{
    BreakGlassSpec, Closing, Extension, Identity, Resolution, ScopedResource, format_time,
};
use crate::api::{Application, BreakGlass};

use super::APP_LABEL;
use super::lifecycle::OPEN_CONDITION;

/// Why a request about a window was refused. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(
        "Application {namespace}/{app} not found: a break-glass window needs an existing application"
    )]
    UnknownApp { namespace: String, app: String },
    #[error("a break-glass window needs a reason (an incident reference such as `INC-1234: …`)")]
    NoReason,
    #[error("--resource {0:?}: expected KIND/NAME, e.g. Deployment/web")]
    BadResource(String),
    #[error("--resource {resource}: Application {app} has applied no such object")]
    NotInApp { app: String, resource: String },
    #[error("BreakGlass {namespace}/{window}: not found")]
    UnknownWindow { namespace: String, window: String },
    #[error("BreakGlass {namespace}/{window} is {phase}: only an open window can be {action}")]
    NotOpen {
        namespace: String,
        window: String,
        phase: WindowPhase,
        action: &'static str,
    },
    #[error("Application {namespace}/{app} has no open break-glass window")]
    NoOpenWindow { namespace: String, app: String },
    #[error(
        "Application {namespace}/{app} has {count} open break-glass windows ({names}): name one"
    )]
    Ambiguous {
        namespace: String,
        app: String,
        count: usize,
        names: String,
    },
    #[error("BreakGlass {namespace}/{window}: {message}")]
    Invalid {
        namespace: String,
        window: String,
        message: String,
    },
    #[error(
        "BreakGlass {namespace}/{window} was created, but no controller opened it within {seconds}s: \
         until one does, self-heal may revert changes in its scope (is `tether run` watching \
         namespace {namespace}?)"
    )]
    NotOpened {
        namespace: String,
        window: String,
        seconds: u64,
    },
    #[error("{object}: watching for the controller's answer: {message}")]
    Watch { object: String, message: String },
    #[error(transparent)]
    TooLong(#[from] TtlTooLong),
    #[error(
        "asking the API server who you are (SelfSubjectReview): {}",
        tether_cluster::error::describe(.0)
    )]
    Identity(kube::Error),
    /// A request about `object` the API server refused (a forbidden one
    /// names the permission missing) or could not answer.
    #[error("{object}: {}", tether_cluster::error::describe(.error))]
    Api {
        object: String,
        #[source]
        error: kube::Error,
    },
}

/// Names `object` as the one a failed request was about.
fn about(object: impl Into<String>) -> impl FnOnce(kube::Error) -> RequestError {
    let object = object.into();
    move |error| RequestError::Api { object, error }
}

/// Who the API server says the caller is, with the groups a window may
/// name: Kubernetes' own `system:` groups (`system:authenticated`,
/// `system:masters`, …) are left out, as the admission policy and the
/// controller refuse them in a window.
pub async fn whoami(client: &Client) -> Result<Identity, RequestError> {
    let api: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = api
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .map_err(RequestError::Identity)?;
    let user = review.status.and_then(|s| s.user_info).unwrap_or_default();
    Ok(Identity {
        username: user.username.unwrap_or_default(),
        groups: user
            .groups
            .unwrap_or_default()
            .into_iter()
            .filter(|group| !is_privileged_group(group))
            .collect(),
    })
}

/// Parses `KIND/NAME` or `KIND.GROUP/NAME` (`Deployment/web`,
/// `Deployment.apps/web`).
pub fn parse_resource(text: &str) -> Result<ScopedResource, RequestError> {
    let bad = || RequestError::BadResource(text.to_string());
    let (kind, name) = text.split_once('/').ok_or_else(bad)?;
    if kind.is_empty() || name.is_empty() || name.contains('/') {
        return Err(bad());
    }
    let (kind, group) = kind.split_once('.').unwrap_or((kind, ""));
    Ok(ScopedResource {
        group: group.to_string(),
        kind: kind.to_string(),
        namespace: None,
        name: name.to_string(),
    })
}

/// What `tether break-glass open` asks for.
pub struct Opening {
    pub namespace: String,
    pub app: String,
    pub resources: Vec<ScopedResource>,
    pub reason: String,
    pub ttl: Duration,
    /// The longest time to live allowed (the controller's
    /// `--max-break-glass-ttl`).
    pub max_ttl: Duration,
}

/// Opens a window; returns it as created.
pub async fn open(client: &Client, opening: Opening) -> Result<BreakGlass, RequestError> {
    if opening.reason.trim().is_empty() {
        return Err(RequestError::NoReason);
    }
    within_cap(opening.ttl, opening.max_ttl)?;
    let apps: Api<Application> = Api::namespaced(client.clone(), &opening.namespace);
    let Some(app) = apps.get_opt(&opening.app).await.map_err(about(format!(
        "Application {}/{}",
        opening.namespace, opening.app
    )))?
    else {
        return Err(RequestError::UnknownApp {
            namespace: opening.namespace,
            app: opening.app,
        });
    };
    let resources = opening
        .resources
        .iter()
        .map(|resource| in_inventory(&app, resource))
        .collect::<Result<Vec<_>, _>>()?;
    let identity = whoami(client).await?;
    let now = SystemTime::now();
    let window = BreakGlass {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", opening.app)),
            namespace: Some(opening.namespace.clone()),
            labels: Some([(APP_LABEL.to_string(), opening.app.clone())].into()),
            ..ObjectMeta::default()
        },
        spec: BreakGlassSpec {
            application: opening.app,
            resources,
            reason: opening.reason,
            opened_by: identity,
            expires_at: format_time(now + opening.ttl),
            extensions: Vec::new(),
            close: None,
        },
        status: None,
    };
    let api: Api<BreakGlass> = Api::namespaced(client.clone(), &opening.namespace);
    let new = format!(
        "BreakGlass {}/{}-* (new)",
        opening.namespace, window.spec.application
    );
    api.create(&PostParams::default(), &window)
        .await
        .map_err(about(new))
}

/// Waits, at most `within`, for the controller to take the new `window` in
/// hand, and returns it once it is Open: from then on self-heal leaves its
/// scope alone. A change made before that may still be reverted, which is
/// why `tether break-glass open` waits. A window the controller marks
/// Invalid is refused with the controller's reason.
pub async fn opened(
    client: &Client,
    window: &BreakGlass,
    within: Duration,
) -> Result<BreakGlass, RequestError> {
    let namespace = window.namespace().unwrap_or_default();
    let name = window.name_any();
    let api: Api<BreakGlass> = Api::namespaced(client.clone(), &namespace);
    let decided = await_condition(api, &name, |window: Option<&BreakGlass>| {
        window.is_some_and(|w| w.status.as_ref().is_some_and(|s| s.phase.is_some()))
    });
    let object = format!("BreakGlass {namespace}/{name}");
    let window = match tokio::time::timeout(within, decided).await {
        Ok(Ok(Some(window))) => window,
        Ok(Ok(None)) => {
            return Err(RequestError::UnknownWindow {
                namespace,
                window: name,
            });
        }
        Ok(Err(error)) => {
            return Err(RequestError::Watch {
                object,
                message: error.to_string(),
            });
        }
        Err(_) => {
            return Err(RequestError::NotOpened {
                namespace,
                window: name,
                seconds: within.as_secs(),
            });
        }
    };
    match window.status.as_ref().and_then(|s| s.phase) {
        Some(WindowPhase::Open) => Ok(window),
        Some(WindowPhase::Invalid) => Err(RequestError::Invalid {
            namespace,
            window: name,
            message: open_condition_message(&window),
        }),
        phase => Err(RequestError::NotOpen {
            namespace,
            window: name,
            phase: phase.unwrap_or(WindowPhase::Invalid),
            action: "used",
        }),
    }
}

/// The controller's message on the window's `Open` condition.
fn open_condition_message(window: &BreakGlass) -> String {
    window
        .status
        .iter()
        .flat_map(|status| &status.conditions)
        .find(|c| c.type_ == OPEN_CONDITION)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// `resource` as the app's inventory names it (with its group and
/// namespace), or an error when the app has no such object.
fn in_inventory(
    app: &Application,
    resource: &ScopedResource,
) -> Result<ScopedResource, RequestError> {
    let inventory = app.inventory();
    inventory
        .iter()
        .find(|entry| {
            entry.kind == resource.kind
                && entry.name == resource.name
                && (resource.group.is_empty() || entry.group == resource.group)
        })
        .map(|entry| ScopedResource {
            group: entry.group.clone(),
            kind: entry.kind.clone(),
            namespace: entry.namespace.clone(),
            name: entry.name.clone(),
        })
        .ok_or_else(|| RequestError::NotInApp {
            app: app.name_any(),
            resource: format!("{}/{}", resource.kind, resource.name),
        })
}

/// The window named `window`, or the one open window of app `app`.
pub async fn find(
    client: &Client,
    namespace: &str,
    app: Option<&str>,
    window: Option<&str>,
) -> Result<BreakGlass, RequestError> {
    let api: Api<BreakGlass> = Api::namespaced(client.clone(), namespace);
    if let Some(name) = window {
        return api
            .get_opt(name)
            .await
            .map_err(about(format!("BreakGlass {namespace}/{name}")))?
            .ok_or_else(|| RequestError::UnknownWindow {
                namespace: namespace.to_string(),
                window: name.to_string(),
            });
    }
    let app = app.unwrap_or_default();
    let now = SystemTime::now();
    let mut open: Vec<BreakGlass> = api
        .list(&Default::default())
        .await
        .map_err(about(format!("BreakGlasses in namespace {namespace}")))?
        .items
        .into_iter()
        .filter(|w| w.spec.application == app)
        .filter(|w| w.times().is_ok_and(|t| t.phase(now) == WindowPhase::Open))
        .collect();
    match open.len() {
        0 => Err(RequestError::NoOpenWindow {
            namespace: namespace.to_string(),
            app: app.to_string(),
        }),
        1 => Ok(open.remove(0)),
        count => Err(RequestError::Ambiguous {
            namespace: namespace.to_string(),
            app: app.to_string(),
            count,
            names: open
                .iter()
                .map(|w| w.name_any())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

fn must_be_open(window: &BreakGlass, action: &'static str) -> Result<(), RequestError> {
    let namespace = window.namespace().unwrap_or_default();
    let times = window.times().map_err(|error| RequestError::Invalid {
        namespace: namespace.clone(),
        window: window.name_any(),
        message: error.to_string(),
    })?;
    match times.phase(SystemTime::now()) {
        WindowPhase::Open => Ok(()),
        phase => Err(RequestError::NotOpen {
            namespace,
            window: window.name_any(),
            phase,
            action,
        }),
    }
}

/// Extends an open window by `ttl` (at most `max_ttl`) from now, as an
/// audited entry of its own.
pub async fn extend(
    client: &Client,
    window: &BreakGlass,
    ttl: Duration,
    max_ttl: Duration,
    reason: &str,
) -> Result<BreakGlass, RequestError> {
    if reason.trim().is_empty() {
        return Err(RequestError::NoReason);
    }
    within_cap(ttl, max_ttl)?;
    must_be_open(window, "extended")?;
    let identity = whoami(client).await?;
    let now = SystemTime::now();
    let mut extensions = window.spec.extensions.clone();
    extensions.push(Extension {
        by: identity.username,
        at: format_time(now),
        expires_at: format_time(now + ttl),
        reason: reason.to_string(),
    });
    patch_spec(client, window, json!({"spec": {"extensions": extensions}})).await
}

/// Closes an open window: `Adopt` after the changes went into Git, or
/// `Revert` to let self-heal converge the scope back to Git now.
pub async fn close(
    client: &Client,
    window: &BreakGlass,
    resolve: Resolution,
) -> Result<BreakGlass, RequestError> {
    must_be_open(window, "closed")?;
    let identity = whoami(client).await?;
    let closing = Closing {
        by: identity.username,
        at: format_time(SystemTime::now()),
        resolve,
    };
    patch_spec(client, window, json!({"spec": {"close": closing}})).await
}

async fn patch_spec(
    client: &Client,
    window: &BreakGlass,
    patch: serde_json::Value,
) -> Result<BreakGlass, RequestError> {
    let namespace = window.namespace().unwrap_or_default();
    let api: Api<BreakGlass> = Api::namespaced(client.clone(), &namespace);
    api.patch(
        &window.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(about(format!(
        "BreakGlass {namespace}/{}",
        window.name_any()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_is_kind_slash_name_with_an_optional_group() {
        let resource = parse_resource("Deployment.apps/web").unwrap();
        assert_eq!(
            (resource.group.as_str(), resource.kind.as_str()),
            ("apps", "Deployment")
        );
        assert_eq!(parse_resource("ConfigMap/settings").unwrap().group, "");
        for bad in ["web", "/web", "Deployment/", "Deployment/a/b"] {
            assert!(parse_resource(bad).is_err(), "{bad}");
        }
    }
}
