//! Sync hooks: objects that run as steps of a sync rather than being part
//! of the app's desired state (a database migration before the new
//! version, a smoke test after it, a clean-up when it fails).
//!
//! An object is a hook when annotated `tether.dev/hook` (`PreSync`, `Sync`,
//! `PostSync`, `SyncFail`, several separated by commas). For migration,
//! Argo CD's `argocd.argoproj.io/hook` means the same (`Skip`: never
//! applied) and Helm's `helm.sh/hook` is mapped: `pre-install` and
//! `pre-upgrade` are PreSync, `post-install` and `post-upgrade` PostSync;
//! Helm hooks with no sync meaning (`test`, `pre-delete`, `post-rollback`,
//! …) are not applied, with a note saying so. Tether's annotation wins
//! over Argo CD's, which wins over Helm's.
//!
//! Pure: [`plan`] sorts a rendered set into the app's resources and its
//! hooks, phase by phase in run order (weight, then kind, then name);
//! [`outcome::judge`] says whether a live hook has finished and how. The
//! controller creates, waits for and deletes them.

pub mod outcome;

use std::collections::BTreeSet;
use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::object::ObjectRef;
use crate::order::kind_rank;

pub use outcome::{HookOutcome, judge};

/// Tether's hook annotation: the phases the object runs in.
pub const HOOK_ANNOTATION: &str = "tether.dev/hook";
/// When a hook is deleted: `BeforeHookCreation` (the default),
/// `HookSucceeded`, `HookFailed` (several separated by commas).
pub const DELETE_POLICY_ANNOTATION: &str = "tether.dev/hook-delete-policy";
/// The order of hooks within a phase: an integer, lower first (default 0).
pub const WEIGHT_ANNOTATION: &str = "tether.dev/hook-weight";
/// How long a hook may run before it fails the sync (`90s`, `5m`, `1h`;
/// default [`DEFAULT_TIMEOUT`]).
pub const TIMEOUT_ANNOTATION: &str = "tether.dev/hook-timeout";
/// How long a hook may run when it does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// Argo CD's hook annotation (`PreSync`, `Sync`, `PostSync`, `SyncFail`, `Skip`).
pub const ARGOCD_HOOK_ANNOTATION: &str = crate::argocd::HOOK_ANNOTATION;
/// Argo CD's delete policy (same words as Tether's).
pub const ARGOCD_DELETE_POLICY_ANNOTATION: &str = "argocd.argoproj.io/hook-delete-policy";
/// Helm's hook annotation (`pre-install`, `post-upgrade`, …).
pub const HELM_HOOK_ANNOTATION: &str = "helm.sh/hook";
/// Helm's hook weight (a string holding an integer).
pub const HELM_WEIGHT_ANNOTATION: &str = "helm.sh/hook-weight";
/// Helm's delete policy (`before-hook-creation`, `hook-succeeded`, `hook-failed`).
pub const HELM_DELETE_POLICY_ANNOTATION: &str = "helm.sh/hook-delete-policy";

crate::vocabulary! {
    /// When in a sync a hook runs.
    pub enum HookPhase("hook phase") {
        /// Before anything else is applied; must succeed for the sync to go on.
        PreSync,
        /// With the app's objects.
        Sync,
        /// Once every object of the sync is Healthy.
        PostSync,
        /// When the sync failed.
        SyncFail,
    }
}

crate::vocabulary! {
    /// When a hook object is deleted.
    pub enum DeletePolicy("hook delete policy") {
        /// The one left by the last sync is deleted before it is created again.
        BeforeHookCreation,
        /// Deleted once it succeeded.
        HookSucceeded,
        /// Deleted once it failed.
        HookFailed,
    }
}

/// One hook: when it runs, in which order, how long it may take and when
/// it is deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// The phases it runs in, in phase order.
    pub phases: Vec<HookPhase>,
    pub weight: i32,
    /// Never empty: [`DeletePolicy::BeforeHookCreation`] when none is given.
    pub delete_policies: Vec<DeletePolicy>,
    pub timeout: Duration,
    /// The annotation that made it a hook.
    pub annotation: &'static str,
}

impl Hook {
    /// Whether the hook is deleted once it ended with `outcome`.
    pub fn deleted_after(&self, outcome: HookOutcome) -> bool {
        match outcome {
            HookOutcome::Succeeded => self.delete_policies.contains(&DeletePolicy::HookSucceeded),
            HookOutcome::Failed => self.delete_policies.contains(&DeletePolicy::HookFailed),
            HookOutcome::Running => false,
        }
    }

    /// Whether the one left by an earlier sync is deleted before this one
    /// is created.
    pub fn replaces_earlier(&self) -> bool {
        self.delete_policies
            .contains(&DeletePolicy::BeforeHookCreation)
    }
}

/// What one object of a rendered set is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// An ordinary object of the app.
    Resource,
    Hook(Hook),
    /// Not applied at all (Argo CD's `Skip`, a Helm hook with no sync
    /// meaning).
    NotApplied(NotApplied),
}

/// An object not applied at all, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotApplied {
    pub object: ObjectRef,
    /// The annotation that says so.
    pub annotation: &'static str,
    /// Its value and why, after the annotation.
    pub message: String,
}

impl fmt::Display for NotApplied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} {}", self.object, self.annotation, self.message)
    }
}

/// Why an object's hook annotations could not be read; names the object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{object}: annotation {annotation}: {value:?} {problem}")]
pub struct BadHook {
    pub object: ObjectRef,
    pub annotation: &'static str,
    pub value: String,
    pub problem: String,
}

/// What `object` (identity `id`) is: a resource, a hook, or not applied.
pub fn classify(id: &ObjectRef, object: &Value) -> Result<Role, BadHook> {
    let annotations = Annotations::of(id, object);
    let (annotation, phases) = match declared(&annotations)? {
        Declared::Hook(annotation, phases) => (annotation, phases),
        Declared::Not(role) => return Ok(role),
    };
    Ok(Role::Hook(Hook {
        phases,
        weight: weight(&annotations)?,
        delete_policies: delete_policies(&annotations)?,
        timeout: timeout(&annotations)?,
        annotation,
    }))
}

/// One object's annotations, read for its hook settings.
struct Annotations<'a> {
    id: &'a ObjectRef,
    map: Option<&'a serde_json::Map<String, Value>>,
}

impl<'a> Annotations<'a> {
    fn of(id: &'a ObjectRef, object: &'a Value) -> Self {
        let map = object
            .pointer("/metadata/annotations")
            .and_then(Value::as_object);
        Annotations { id, map }
    }

    /// The value of `key`, as text (a non-string as its JSON).
    fn get(&self, key: &str) -> Option<String> {
        self.map.and_then(|a| a.get(key)).map(|v| match v {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        })
    }

    fn bad(&self, annotation: &'static str, value: &str, problem: String) -> BadHook {
        BadHook {
            object: self.id.clone(),
            annotation,
            value: value.to_string(),
            problem,
        }
    }

    fn not_applied(&self, annotation: &'static str, message: String) -> Declared {
        Declared::Not(Role::NotApplied(NotApplied {
            object: self.id.clone(),
            annotation,
            message,
        }))
    }
}

/// What the hook annotations declare: a hook's phases (and the annotation
/// that says so), or another role.
enum Declared {
    Hook(&'static str, Vec<HookPhase>),
    Not(Role),
}

/// Tether's hook annotation first, then Argo CD's, then Helm's.
fn declared(annotations: &Annotations) -> Result<Declared, BadHook> {
    if let Some(value) = annotations.get(HOOK_ANNOTATION) {
        let phases =
            tether_phases(&value).map_err(|p| annotations.bad(HOOK_ANNOTATION, &value, p))?;
        return Ok(Declared::Hook(HOOK_ANNOTATION, phases));
    }
    if let Some(value) = annotations.get(ARGOCD_HOOK_ANNOTATION) {
        if words(&value).any(|w| w == "Skip") {
            let message = format!("{value:?}: not applied (Argo CD's Skip)");
            return Ok(annotations.not_applied(ARGOCD_HOOK_ANNOTATION, message));
        }
        let phases = tether_phases(&value)
            .map_err(|p| annotations.bad(ARGOCD_HOOK_ANNOTATION, &value, p))?;
        return Ok(Declared::Hook(ARGOCD_HOOK_ANNOTATION, phases));
    }
    if let Some(value) = annotations.get(HELM_HOOK_ANNOTATION) {
        let phases = helm_phases(&value);
        if phases.is_empty() {
            let message = format!(
                "{value:?}: not applied (a Helm hook with no sync phase; only \
                 pre-install, pre-upgrade, post-install and post-upgrade run)"
            );
            return Ok(annotations.not_applied(HELM_HOOK_ANNOTATION, message));
        }
        return Ok(Declared::Hook(HELM_HOOK_ANNOTATION, phases));
    }
    Ok(Declared::Not(Role::Resource))
}

/// The first weight or wave annotation given; 0 without one.
fn weight(annotations: &Annotations) -> Result<i32, BadHook> {
    let given = [
        WEIGHT_ANNOTATION,
        crate::order::SYNC_WAVE_ANNOTATION,
        crate::argocd::SYNC_WAVE_ANNOTATION,
        HELM_WEIGHT_ANNOTATION,
    ]
    .into_iter()
    .find_map(|key| Some((key, annotations.get(key)?)));
    match given {
        Some((key, value)) => value
            .trim()
            .parse()
            .map_err(|_| annotations.bad(key, &value, "is not an integer".into())),
        None => Ok(0),
    }
}

/// The delete policies of the first delete-policy annotation given;
/// `BeforeHookCreation` without one.
fn delete_policies(annotations: &Annotations) -> Result<Vec<DeletePolicy>, BadHook> {
    let given = [
        DELETE_POLICY_ANNOTATION,
        ARGOCD_DELETE_POLICY_ANNOTATION,
        HELM_DELETE_POLICY_ANNOTATION,
    ]
    .into_iter()
    .find_map(|key| Some((key, annotations.get(key)?)));
    let mut policies = BTreeSet::new();
    if let Some((key, value)) = given {
        for word in words(&value) {
            let policy = delete_policy(word).ok_or_else(|| {
                annotations.bad(
                    key,
                    &value,
                    "is not a delete policy (BeforeHookCreation, HookSucceeded, HookFailed)".into(),
                )
            })?;
            policies.insert(policy);
        }
    }
    if policies.is_empty() {
        policies.insert(DeletePolicy::BeforeHookCreation);
    }
    Ok(policies.into_iter().collect())
}

fn timeout(annotations: &Annotations) -> Result<Duration, BadHook> {
    match annotations.get(TIMEOUT_ANNOTATION) {
        Some(value) => {
            parse_timeout(&value).map_err(|p| annotations.bad(TIMEOUT_ANNOTATION, &value, p))
        }
        None => Ok(DEFAULT_TIMEOUT),
    }
}

/// A hook of a rendered set, with its place in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedHook {
    /// Its index in the set given to [`plan`].
    pub index: usize,
    pub id: ObjectRef,
    pub hook: Hook,
}

/// A rendered set sorted into the app's resources and its hooks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookPlan {
    /// Indices of the ordinary objects, in the order given.
    pub resources: Vec<usize>,
    /// Every hook, sorted by weight, kind and name.
    pub hooks: Vec<PlannedHook>,
    /// The objects not applied at all, and why.
    pub notes: Vec<NotApplied>,
}

impl HookPlan {
    /// The hooks of `phase`, in run order.
    pub fn phase(&self, phase: HookPhase) -> impl Iterator<Item = &PlannedHook> {
        self.hooks
            .iter()
            .filter(move |planned| planned.hook.phases.contains(&phase))
    }

    /// Whether the set has hooks of `phase`.
    pub fn has(&self, phase: HookPhase) -> bool {
        self.phase(phase).next().is_some()
    }
}

/// Sorts `objects` (identity and object, as rendered) into resources and
/// hooks; fails on the first malformed hook annotation.
pub fn plan(objects: &[(ObjectRef, Value)]) -> Result<HookPlan, BadHook> {
    let mut plan = HookPlan::default();
    for (index, (id, object)) in objects.iter().enumerate() {
        match classify(id, object)? {
            Role::Resource => plan.resources.push(index),
            Role::Hook(hook) => plan.hooks.push(PlannedHook {
                index,
                id: id.clone(),
                hook,
            }),
            Role::NotApplied(note) => plan.notes.push(note),
        }
    }
    plan.hooks.sort_by(|a, b| {
        (a.hook.weight, kind_rank(&a.id.kind), &a.id.kind, &a.id.name).cmp(&(
            b.hook.weight,
            kind_rank(&b.id.kind),
            &b.id.kind,
            &b.id.name,
        ))
    });
    Ok(plan)
}

/// Whether `object` is a hook or an object not applied at all, by its
/// annotations only (cheap: for filtering before identities are known).
pub fn is_hook_or_skipped(object: &Value) -> bool {
    object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| {
            a.contains_key(HOOK_ANNOTATION)
                || a.contains_key(ARGOCD_HOOK_ANNOTATION)
                || a.contains_key(HELM_HOOK_ANNOTATION)
        })
}

fn words(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|w| !w.is_empty())
}

fn tether_phases(value: &str) -> Result<Vec<HookPhase>, String> {
    let mut phases = BTreeSet::new();
    for word in words(value) {
        phases.insert(
            <HookPhase as crate::Vocabulary>::parse(word).map_err(|_| {
                "is not a hook phase (PreSync, Sync, PostSync, SyncFail)".to_string()
            })?,
        );
    }
    if phases.is_empty() {
        return Err("names no hook phase".into());
    }
    Ok(phases.into_iter().collect())
}

fn helm_phases(value: &str) -> Vec<HookPhase> {
    let phases: BTreeSet<HookPhase> = words(value)
        .filter_map(|word| match word {
            "pre-install" | "pre-upgrade" => Some(HookPhase::PreSync),
            "post-install" | "post-upgrade" => Some(HookPhase::PostSync),
            _ => None,
        })
        .collect();
    phases.into_iter().collect()
}

fn delete_policy(word: &str) -> Option<DeletePolicy> {
    match word {
        "BeforeHookCreation" | "before-hook-creation" => Some(DeletePolicy::BeforeHookCreation),
        "HookSucceeded" | "hook-succeeded" => Some(DeletePolicy::HookSucceeded),
        "HookFailed" | "hook-failed" => Some(DeletePolicy::HookFailed),
        _ => None,
    }
}

/// A timeout like `90s`, `5m` or `1h30m`, or a bare number of seconds.
fn parse_timeout(value: &str) -> Result<Duration, String> {
    if let Ok(seconds) = value.trim().parse::<u64>() {
        return match seconds {
            0 => Err("must be longer than zero".into()),
            _ => Ok(Duration::from_secs(seconds)),
        };
    }
    crate::window::parse_ttl(value).map_err(|error| match error.to_string().split_once(": ") {
        Some((_, reason)) => format!("is not a timeout: {reason}"),
        None => "is not a timeout".into(),
    })
}

impl fmt::Display for PlannedHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(kind: &str, name: &str, annotations: Value) -> (ObjectRef, Value) {
        let api_version = if kind == "Job" { "batch/v1" } else { "v1" };
        let object = json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "shop", "annotations": annotations}});
        (ObjectRef::from_object(&object).unwrap(), object)
    }

    fn hook_of(annotations: Value) -> Hook {
        let (id, object) = object("Job", "migrate", annotations);
        match classify(&id, &object).unwrap() {
            Role::Hook(hook) => hook,
            other => panic!("not a hook: {other:?}"),
        }
    }

    #[test]
    fn a_hook_without_a_policy_is_replaced_before_it_is_created_and_runs_five_minutes() {
        let hook = hook_of(json!({HOOK_ANNOTATION: "PreSync"}));
        assert_eq!(hook.phases, [HookPhase::PreSync]);
        assert_eq!(hook.delete_policies, [DeletePolicy::BeforeHookCreation]);
        assert_eq!(hook.timeout, DEFAULT_TIMEOUT);
        assert!(hook.replaces_earlier());
        assert!(!hook.deleted_after(HookOutcome::Succeeded));
    }

    #[test]
    fn tethers_annotation_wins_over_argo_cds_and_helms() {
        let hook = hook_of(json!({HOOK_ANNOTATION: "PostSync",
            ARGOCD_HOOK_ANNOTATION: "PreSync", HELM_HOOK_ANNOTATION: "pre-install"}));
        assert_eq!(hook.phases, [HookPhase::PostSync]);
        assert_eq!(hook.annotation, HOOK_ANNOTATION);
    }

    #[test]
    fn a_malformed_annotation_names_the_object_the_annotation_and_the_value() {
        let (id, object) = object("Job", "migrate", json!({HOOK_ANNOTATION: "Before"}));
        let error = classify(&id, &object).unwrap_err();
        assert_eq!(
            error.to_string(),
            "Job shop/migrate: annotation tether.dev/hook: \"Before\" is not a hook phase \
             (PreSync, Sync, PostSync, SyncFail)"
        );
        let (id, object) = object_with_timeout("soon");
        let error = classify(&id, &object).unwrap_err();
        assert!(
            error.to_string().starts_with(
                "Job shop/migrate: annotation tether.dev/hook-timeout: \"soon\" is not a timeout"
            ),
            "{error}"
        );
    }

    fn object_with_timeout(timeout: &str) -> (ObjectRef, Value) {
        object(
            "Job",
            "migrate",
            json!({HOOK_ANNOTATION: "PreSync", TIMEOUT_ANNOTATION: timeout}),
        )
    }

    #[test]
    fn a_timeout_is_read_with_units_or_as_seconds() {
        for (text, seconds) in [("90s", 90), ("2m", 120), ("1h30m", 5400), ("45", 45)] {
            let (id, object) = object_with_timeout(text);
            let Role::Hook(hook) = classify(&id, &object).unwrap() else {
                panic!("not a hook")
            };
            assert_eq!(hook.timeout, Duration::from_secs(seconds), "{text}");
        }
    }

    #[test]
    fn hooks_of_one_weight_run_by_kind_then_name() {
        let set = [
            object("Job", "b", json!({HOOK_ANNOTATION: "PreSync"})),
            object("ConfigMap", "z", json!({HOOK_ANNOTATION: "PreSync"})),
            object("Job", "a", json!({HOOK_ANNOTATION: "PreSync"})),
            object(
                "Job",
                "first",
                json!({HOOK_ANNOTATION: "PreSync", WEIGHT_ANNOTATION: "-1"}),
            ),
        ];
        let plan = plan(&set).unwrap();
        let order: Vec<&str> = plan
            .phase(HookPhase::PreSync)
            .map(|h| h.id.name.as_str())
            .collect();
        assert_eq!(order, ["first", "z", "a", "b"]);
    }
}
