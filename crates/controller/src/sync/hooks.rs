//! Running the sync hooks of one phase (`tether_core::hook` plans them):
//! each is created fresh (the one an earlier sync left is deleted first
//! under `BeforeHookCreation`), in run order, and waited for until it
//! finishes — at most [`crate::sync::waves::WAVE_HOLD`] in one pass: a hook
//! still running ends the pass ([`PhaseEnd::Running`]) and the next pass
//! finds it through the operation's record ([`HookRun`]) and looks again.
//!
//! Hooks carry the label [`HOOK_OF_LABEL`], never the app's tracking
//! label, so they are not part of the app's live state: never compared,
//! never drift, never pruned.

use std::time::{Duration, SystemTime};

use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, PostParams, PropagationPolicy};
use kube::core::DynamicObject;
use serde_json::Value;
use tether_cluster::{Applier, ClusterError};
use tether_core::ObjectRef;
use tether_core::hook::{HookOutcome, HookPhase, PlannedHook, judge};
use tether_core::tracking::{AppRef, FIELD_MANAGER};

use crate::api::application::HookRun;

/// The label on every hook object: the app it runs for.
pub const HOOK_OF_LABEL: &str = "tether.dev/hook-of";
/// How often a running hook is read while the pass waits for it.
const POLL: Duration = Duration::from_millis(250);
/// How long an earlier hook may take to disappear once deleted.
const GONE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a hook could not be created. The hook is named by the run that
/// records the error, so the message starts with what went wrong.
#[derive(Debug, thiserror::Error)]
enum HookError {
    #[error(transparent)]
    Resolve(#[from] ClusterError),
    #[error("not an object: {0}")]
    NotAnObject(serde_json::Error),
    #[error("creating it failed: {}", tether_cluster::error::describe(.0))]
    Create(kube::Error),
    #[error("listing earlier runs failed: {}", tether_cluster::error::describe(.0))]
    ListEarlier(kube::Error),
    #[error("deleting the earlier {name} failed: {}", tether_cluster::error::describe(.error))]
    DeleteEarlier { name: String, error: kube::Error },
    #[error("reading the earlier {name} failed: {}", tether_cluster::error::describe(.error))]
    ReadEarlier { name: String, error: kube::Error },
    #[error("the earlier {name} was not gone {}s after it was deleted", GONE_TIMEOUT.as_secs())]
    EarlierNotGone { name: String },
}

/// One hook of the rendered set: its plan and its object as rendered.
pub struct HookObject {
    pub planned: PlannedHook,
    pub object: Value,
}

/// How a phase ended in this pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PhaseEnd {
    /// Every hook of the phase succeeded (or it has none).
    Done,
    /// This hook is still running; look again at the next pass.
    Running {
        hook: String,
        message: String,
        since: SystemTime,
    },
    /// This hook failed, or did not finish within its timeout.
    Failed { hook: String, message: String },
}

/// Runs the hooks of `phase` among `hooks` (in run order) for `owner`,
/// recording each in `runs` (which holds what earlier passes of this
/// operation recorded); waits for each at most `hold`.
pub async fn run_phase(
    applier: &Applier,
    owner: &AppRef,
    phase: HookPhase,
    hooks: &[HookObject],
    runs: &mut Vec<HookRun>,
    hold: Duration,
) -> PhaseEnd {
    for hook in hooks
        .iter()
        .filter(|h| h.planned.hook.phases.contains(&phase))
    {
        let index = match runs.iter().position(|run| is_run_of(run, phase, hook)) {
            Some(index) => index,
            None => match create(applier, owner, phase, hook).await {
                Ok(run) => {
                    runs.push(run);
                    runs.len() - 1
                }
                Err(error) => {
                    let message = error.to_string();
                    let name = hook.planned.id.to_string();
                    runs.push(finished_run(
                        &name,
                        phase,
                        hook,
                        HookOutcome::Failed,
                        &message,
                    ));
                    return PhaseEnd::Failed {
                        hook: name,
                        message,
                    };
                }
            },
        };
        match runs[index].outcome {
            HookOutcome::Succeeded => continue,
            HookOutcome::Failed => {
                return PhaseEnd::Failed {
                    hook: runs[index].name.clone(),
                    message: runs[index].message.clone(),
                };
            }
            HookOutcome::Running => {}
        }
        let end = wait(applier, hook, &mut runs[index], hold).await;
        if end != PhaseEnd::Done {
            return end;
        }
    }
    PhaseEnd::Done
}

/// Whether `run` records `hook` in `phase`.
fn is_run_of(run: &HookRun, phase: HookPhase, hook: &HookObject) -> bool {
    run.phase == phase
        && match generate_name(&hook.object) {
            Some(prefix) => run.generate_name.as_deref() == Some(prefix),
            None => run.name == hook.planned.id.to_string(),
        }
}

/// Creates `hook`, deleting the one an earlier sync left first when its
/// policy says so; the run records it as Running.
async fn create(
    applier: &Applier,
    owner: &AppRef,
    phase: HookPhase,
    hook: &HookObject,
) -> Result<HookRun, HookError> {
    let id = &hook.planned.id;
    let api = applier.api_for(id, &hook.object).await?;
    if hook.planned.hook.replaces_earlier() {
        delete_earlier(&api, owner, hook).await?;
    }
    let mut object = hook.object.clone();
    if let Some(namespace) = &id.namespace {
        object["metadata"]["namespace"] = Value::String(namespace.clone());
    }
    object["metadata"]["labels"][HOOK_OF_LABEL] = Value::String(owner.label_value());
    let body: DynamicObject = serde_json::from_value(object).map_err(HookError::NotAnObject)?;
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    let created = api
        .create(&params, &body)
        .await
        .map_err(HookError::Create)?;
    let name = ObjectRef {
        name: created.metadata.name.clone().unwrap_or_default(),
        ..id.clone()
    };
    tracing::info!(hook = %name, %phase, "hook created");
    Ok(HookRun {
        name: name.to_string(),
        generate_name: generate_name(&hook.object).map(str::to_string),
        phase,
        outcome: HookOutcome::Running,
        message: String::new(),
        started_at: Timestamp::now().to_string(),
        finished_at: None,
    })
}

/// Deletes what an earlier sync left of `hook` (the object of its name,
/// or those made from its generateName for this app) and waits until it
/// is gone.
async fn delete_earlier(
    api: &kube::Api<DynamicObject>,
    owner: &AppRef,
    hook: &HookObject,
) -> Result<(), HookError> {
    let names: Vec<String> = match generate_name(&hook.object) {
        None => vec![hook.planned.id.name.clone()],
        Some(prefix) => {
            let selector = format!("{HOOK_OF_LABEL}={}", owner.label_value());
            api.list(&ListParams::default().labels(&selector))
                .await
                .map_err(HookError::ListEarlier)?
                .items
                .into_iter()
                .filter(|o| o.metadata.generate_name.as_deref() == Some(prefix))
                .filter_map(|o| o.metadata.name)
                .collect()
        }
    };
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    for name in &names {
        match api.delete(name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => continue,
            Err(error) => {
                let name = name.clone();
                return Err(HookError::DeleteEarlier { name, error });
            }
        }
        let deadline = tokio::time::Instant::now() + GONE_TIMEOUT;
        loop {
            match api.get_opt(name).await {
                Ok(None) => break,
                Ok(Some(_)) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(POLL).await;
                }
                Ok(Some(_)) => {
                    let name = name.clone();
                    return Err(HookError::EarlierNotGone { name });
                }
                Err(error) => {
                    let name = name.clone();
                    return Err(HookError::ReadEarlier { name, error });
                }
            }
        }
    }
    Ok(())
}

/// Waits at most `hold` for the hook `run` records to finish; records
/// how it ended and deletes it when its policy says so.
async fn wait(applier: &Applier, hook: &HookObject, run: &mut HookRun, hold: Duration) -> PhaseEnd {
    let started: SystemTime = run
        .started_at
        .parse::<Timestamp>()
        .map(SystemTime::from)
        .unwrap_or_else(|_| SystemTime::now());
    let timeout = hook.planned.hook.timeout;
    let created = ObjectRef {
        name: run
            .name
            .rsplit(['/', ' '])
            .next()
            .unwrap_or_default()
            .to_string(),
        ..hook.planned.id.clone()
    };
    let api = match applier.api_for(&created, &hook.object).await {
        Ok(api) => api,
        Err(error) => return failed(run, error.to_string()),
    };
    let until = tokio::time::Instant::now() + hold;
    loop {
        let (outcome, message) = match api.get_opt(&created.name).await {
            Ok(Some(live)) => judge(&serde_json::to_value(live).unwrap_or(Value::Null)),
            Ok(None) => (HookOutcome::Failed, "deleted while it ran".to_string()),
            Err(error) => (HookOutcome::Running, format!("reading it failed: {error}")),
        };
        match outcome {
            HookOutcome::Succeeded => {
                finish(run, HookOutcome::Succeeded, String::new());
                if hook.planned.hook.deleted_after(HookOutcome::Succeeded) {
                    delete(&api, &created.name).await;
                }
                return PhaseEnd::Done;
            }
            HookOutcome::Failed => {
                if hook.planned.hook.deleted_after(HookOutcome::Failed) {
                    delete(&api, &created.name).await;
                }
                return failed(run, message);
            }
            HookOutcome::Running => {}
        }
        let ran = started.elapsed().unwrap_or_default();
        if ran >= timeout {
            if hook.planned.hook.deleted_after(HookOutcome::Failed) {
                delete(&api, &created.name).await;
            }
            return failed(
                run,
                format!("did not finish within {}s ({message})", timeout.as_secs()),
            );
        }
        if tokio::time::Instant::now() >= until {
            run.message.clone_from(&message);
            return PhaseEnd::Running {
                hook: run.name.clone(),
                message,
                since: started,
            };
        }
        tokio::time::sleep(POLL).await;
    }
}

fn failed(run: &mut HookRun, message: String) -> PhaseEnd {
    finish(run, HookOutcome::Failed, message.clone());
    PhaseEnd::Failed {
        hook: run.name.clone(),
        message,
    }
}

fn finish(run: &mut HookRun, outcome: HookOutcome, message: String) {
    run.outcome = outcome;
    run.message = message;
    run.finished_at = Some(Timestamp::now().to_string());
}

fn finished_run(
    name: &str,
    phase: HookPhase,
    hook: &HookObject,
    outcome: HookOutcome,
    message: &str,
) -> HookRun {
    let now = Timestamp::now().to_string();
    HookRun {
        name: name.to_string(),
        generate_name: generate_name(&hook.object).map(str::to_string),
        phase,
        outcome,
        message: message.to_string(),
        started_at: now.clone(),
        finished_at: Some(now),
    }
}

/// Deletes a finished hook (its delete policy says so); a failure is only
/// logged: the next `BeforeHookCreation` deletes it anyway.
async fn delete(api: &kube::Api<DynamicObject>, name: &str) {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    if let Err(error) = api.delete(name, &params).await {
        tracing::warn!(hook = name, %error, "deleting a finished hook failed");
    }
}

fn generate_name(object: &Value) -> Option<&str> {
    if object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_some()
    {
        return None;
    }
    object
        .pointer("/metadata/generateName")
        .and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hook_the_api_server_refused_says_its_words_in_status_not_kubes_struct() {
        let message =
            "jobs.batch \"migrate\" is forbidden: User \"tether\" cannot create resource \"jobs\"";
        let status = kube::core::Status::failure(message, "Forbidden").with_code(403);
        let refused = HookError::Create(kube::Error::Api(status.boxed()));
        assert_eq!(
            refused.to_string(),
            format!("creating it failed: {message} (Forbidden)")
        );
    }
}
