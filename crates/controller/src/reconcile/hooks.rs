//! Sync hooks in the reconcile (`tether_core::hook` decides, and
//! [`crate::sync::hooks`] runs them): hooks are taken out of the desired
//! state before anything is compared — so they are never drift and never
//! pruned — and run by [`apply::sync`](super::apply::sync) around the
//! sync: PreSync before anything is applied, Sync with the app's objects,
//! PostSync once every object is Healthy, SyncFail when the sync failed.

use std::sync::Arc;

use tether_core::argocd::Warning;
use tether_core::hook::{BadHook, HookPhase, is_hook_or_skipped, plan};
use tether_source::{Manifest, Rendered};

use super::Pass;
use crate::api::application::HookRun;
use crate::sync::hooks::{HookObject, PhaseEnd, run_phase};
use crate::sync::waves::WAVE_HOLD;
use crate::sync::{SyncError, SyncReport};

/// The hooks of a rendered set, in run order.
#[derive(Default)]
pub struct Hooks {
    pub objects: Vec<HookObject>,
}

impl Hooks {
    pub fn has(&self, phase: HookPhase) -> bool {
        self.objects
            .iter()
            .any(|hook| hook.planned.hook.phases.contains(&phase))
    }
}

/// `desired` without its hooks and the objects not applied at all; the
/// hooks, and a warning for each object not applied (condition
/// `Unsupported`).
pub async fn set_aside(
    pass: &Pass<'_>,
    mut desired: Rendered,
) -> Result<(Rendered, Hooks, Vec<Warning>), BadHook> {
    if !desired
        .manifests
        .iter()
        .any(|m| is_hook_or_skipped(&m.object))
    {
        return Ok((desired, Hooks::default(), Vec::new()));
    }
    let mut kept: Vec<Manifest> = Vec::with_capacity(desired.manifests.len());
    let mut candidates = Vec::new();
    for manifest in desired.manifests.iter() {
        if !is_hook_or_skipped(&manifest.object) {
            kept.push(manifest.clone());
            continue;
        }
        let id = super::identify(&pass.applier, manifest).await;
        candidates.push((id, manifest.object.clone()));
    }
    let planned = plan(&candidates)?;
    let objects = planned
        .hooks
        .into_iter()
        .map(|planned| HookObject {
            object: candidates[planned.index].1.clone(),
            planned,
        })
        .collect();
    let warnings = planned
        .notes
        .into_iter()
        .map(|note| Warning {
            object: note.object,
            annotation: note.annotation.to_string(),
            message: note.message,
        })
        .collect();
    // Annotated as a hook, yet an ordinary object (cannot happen today:
    // every hook annotation makes a hook or a note), stays applied.
    desired.manifests = Arc::new(kept);
    Ok((desired, Hooks { objects }, warnings))
}

/// The hooks an earlier pass of the operation toward `revision` recorded
/// (it is still running), to resume from.
pub fn earlier_runs(pass: &Pass<'_>, revision: &str) -> Vec<HookRun> {
    super::operation::resumed_operation(&pass.app, revision)
        .map(|operation| operation.hooks.clone())
        .unwrap_or_default()
}

/// Runs the hooks of `phase`; a hook still running or failed becomes the
/// sync's error (with what `report` applied before it).
pub async fn run(
    pass: &Pass<'_>,
    hooks: &Hooks,
    phase: HookPhase,
    runs: &mut Vec<HookRun>,
    report: Option<&SyncReport>,
) -> Result<(), SyncError> {
    if !hooks.has(phase) {
        return Ok(());
    }
    let applied = report.map(|r| r.results.clone()).unwrap_or_default();
    match run_phase(
        &pass.applier,
        &pass.owner,
        phase,
        &hooks.objects,
        runs,
        WAVE_HOLD,
    )
    .await
    {
        PhaseEnd::Done => Ok(()),
        PhaseEnd::Running {
            hook,
            message,
            since,
        } => Err(SyncError::HookRunning {
            phase,
            hook,
            message,
            since,
            applied,
        }),
        PhaseEnd::Failed { hook, message } => Err(SyncError::Hook {
            phase,
            hook,
            message,
            applied,
        }),
    }
}

/// Runs the SyncFail hooks of a sync that failed: created and given one
/// hold to finish; one still running is left to run (and recorded so).
pub async fn sync_failed(pass: &Pass<'_>, hooks: &Hooks, runs: &mut Vec<HookRun>) {
    if let Err(error) = run(pass, hooks, HookPhase::SyncFail, runs, None).await {
        tracing::info!(app = %pass.owner.label_value(), %error, "SyncFail hook");
    }
}
