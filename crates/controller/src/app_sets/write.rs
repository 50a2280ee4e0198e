//! Carrying out a set's plan (server-side apply of each generated app,
//! deletes that keep or take the app's objects) and writing its status.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::Store;
use serde_json::{Value, json};
use tether_core::ConditionStatus;
use tether_core::app_set::plan::{DIGEST_ANNOTATION, SET_LABEL};
use tether_core::app_set::{Deletion, Existing, Plan, Policy};

use super::SetError;
use crate::api::application::{CASCADE_FINALIZER, set_condition};
use crate::api::application_set::{ApplicationSetStatus, GeneratedApplication};
use crate::api::{Application, ApplicationSet, StoredApplication};
use crate::context::Context;

/// The field manager of the set's server-side applies (not the
/// controller's own `tether`, which owns the apps' status).
pub const FIELD_MANAGER: &str = "tether-applicationset";
/// Applies in flight at once.
const APPLIES_AT_ONCE: usize = 16;
/// The most apps the status lists.
const LISTED: usize = 500;
/// How long a round waits for the Application cache's first list.
const CACHE_WAIT: Duration = Duration::from_secs(30);

/// `app` as the set's: its kind, label, owner reference, and the cascade
/// finalizer when the set deletes apps with their objects.
pub fn owned(mut app: Value, set: &ApplicationSet, policy: Policy) -> Value {
    let name = set.metadata.name.clone().unwrap_or_default();
    app["apiVersion"] = json!("tether.dev/v1alpha1");
    app["kind"] = json!("Application");
    let meta = &mut app["metadata"];
    meta["namespace"] = json!(set.metadata.namespace);
    if !meta["labels"].is_object() {
        meta["labels"] = json!({});
    }
    meta["labels"][SET_LABEL] = json!(name);
    meta["ownerReferences"] = json!([{
        "apiVersion": ApplicationSet::api_version(&()),
        "kind": ApplicationSet::kind(&()),
        "name": name,
        "uid": set.metadata.uid,
        "controller": true,
    }]);
    if !policy.preserve_resources {
        let finalizers = meta["finalizers"].as_array().cloned().unwrap_or_default();
        if !finalizers.iter().any(|f| f == CASCADE_FINALIZER) {
            let mut finalizers = finalizers;
            finalizers.push(json!(CASCADE_FINALIZER));
            meta["finalizers"] = Value::Array(finalizers);
        }
    }
    app
}

/// The Applications in the set's namespace, as the controller's cache has
/// them, each said to be the set's when it carries its label.
pub async fn existing(ctx: &Context, namespace: &str, set: &str) -> Vec<Existing> {
    let _ = tokio::time::timeout(CACHE_WAIT, ctx.apps.wait_until_ready()).await;
    in_namespace(&ctx.apps, namespace)
        .map(|app| {
            let meta = &app.metadata;
            Existing {
                name: meta.name.clone().unwrap_or_default(),
                owned: meta
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SET_LABEL))
                    .is_some_and(|s| s == set),
                digest: meta
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(DIGEST_ANNOTATION))
                    .cloned(),
                deleting: meta.deletion_timestamp.is_some(),
            }
        })
        .collect()
}

fn in_namespace<'a>(
    apps: &'a Store<StoredApplication>,
    namespace: &'a str,
) -> impl Iterator<Item = Arc<StoredApplication>> + 'a {
    apps.state()
        .into_iter()
        .filter(move |app| app.metadata.namespace.as_deref() == Some(namespace))
}

/// Applies what the plan creates and updates, deletes what it deletes;
/// returns what failed, each naming the Application.
pub async fn carry_out(
    ctx: &Context,
    namespace: &str,
    plan: &Plan,
    report: &mut Report,
) -> Vec<String> {
    let api: Api<Application> = Api::namespaced(ctx.client.clone(), namespace);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    // Owned, so the futures borrow nothing (the controller's runner wants
    // them general over every lifetime).
    let applies: Vec<(Value, &'static str)> = plan
        .create
        .iter()
        .map(|app| (app.clone(), "created"))
        .chain(plan.update.iter().map(|app| (app.clone(), "configured")))
        .collect();
    let applying: Vec<_> = applies
        .into_iter()
        .map(|(app, action)| {
            let (api, params, namespace) = (api.clone(), params.clone(), namespace.to_string());
            apply_one(api, params, namespace, app, action)
        })
        .collect();
    let outcomes: Vec<(String, &'static str, Result<(), String>)> = futures::stream::iter(applying)
        .buffer_unordered(APPLIES_AT_ONCE)
        .collect()
        .await;
    let mut failures = Vec::new();
    for (name, action, result) in outcomes {
        match result {
            Ok(()) => report.acted(&name, action),
            Err(error) => failures.push(error),
        }
    }
    for name in &plan.unchanged {
        report.acted(name, "unchanged");
    }
    for deletion in &plan.delete {
        if let Err(error) = delete(ctx, &api, namespace, deletion).await {
            failures.push(error);
        }
    }
    failures
}

async fn apply_one(
    api: Api<Application>,
    params: PatchParams,
    namespace: String,
    app: Value,
    action: &'static str,
) -> (String, &'static str, Result<(), String>) {
    let name = app["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let result = api
        .patch(&name, &params, &Patch::Apply(&app))
        .await
        .map(|_| ())
        .map_err(|error| format!("Application {namespace}/{name}: apply failed: {error}"));
    (name, action, result)
}

/// Deletes one app: first its cascade finalizer set as the plan says
/// (removed: its objects stay; added: they go with it).
async fn delete(
    ctx: &Context,
    api: &Api<Application>,
    namespace: &str,
    deletion: &Deletion,
) -> Result<(), String> {
    let name = &deletion.name;
    let failed = |step: &str, error: kube::Error| {
        format!(
            "Application {namespace}/{name}: {step} failed: {}",
            tether_cluster::error::describe(&error)
        )
    };
    let key = kube::runtime::reflector::ObjectRef::new(name).within(namespace);
    let finalizers: Vec<String> = ctx
        .apps
        .get(&key)
        .and_then(|app| app.metadata.finalizers.clone())
        .unwrap_or_default();
    let has = finalizers.iter().any(|f| f == CASCADE_FINALIZER);
    let wanted: Option<Vec<String>> = match (deletion.cascade, has) {
        (true, false) => Some(
            finalizers
                .iter()
                .cloned()
                .chain([CASCADE_FINALIZER.to_string()])
                .collect(),
        ),
        (false, true) => Some(
            finalizers
                .iter()
                .filter(|f| *f != CASCADE_FINALIZER)
                .cloned()
                .collect(),
        ),
        _ => None,
    };
    if let Some(finalizers) = wanted {
        let patch = json!({"metadata": {"finalizers": finalizers}});
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(error) => return Err(failed("setting its finalizers", error)),
        }
    }
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(failed("delete", error)),
    }
}

/// The status a round writes.
pub struct Report {
    namespace: String,
    name: String,
    generation: Option<i64>,
    before: Option<ApplicationSetStatus>,
    status: ApplicationSetStatus,
    pub revisions: Vec<String>,
    actions: std::collections::BTreeMap<String, &'static str>,
}

impl Report {
    pub fn new(set: &ApplicationSet) -> Report {
        let before = set.status.clone();
        Report {
            namespace: set.metadata.namespace.clone().unwrap_or_default(),
            name: set.metadata.name.clone().unwrap_or_default(),
            generation: set.metadata.generation,
            status: ApplicationSetStatus {
                conditions: before
                    .as_ref()
                    .map(|s| s.conditions.clone())
                    .unwrap_or_default(),
                applications: before
                    .as_ref()
                    .map(|s| s.applications.clone())
                    .unwrap_or_default(),
                application_count: before.as_ref().and_then(|s| s.application_count),
                ..ApplicationSetStatus::default()
            },
            before,
            revisions: Vec::new(),
            actions: Default::default(),
        }
    }

    pub fn failed(&mut self, type_: &str, reason: &str, message: String) {
        self.condition(type_, ConditionStatus::False, reason, message);
    }

    pub fn succeeded(&mut self, type_: &str, reason: &str, message: String) {
        self.condition(type_, ConditionStatus::True, reason, message);
    }

    /// Sets condition `type_` to `value` as of now.
    fn condition(&mut self, type_: &str, value: ConditionStatus, reason: &str, message: String) {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        set_condition(
            &mut self.status.conditions,
            type_,
            value,
            reason,
            message,
            &now,
        );
    }

    /// The generators and the template made `count` apps.
    pub fn generated(&mut self, count: usize) {
        self.status.application_count = Some(count);
        self.succeeded(
            super::PARAMETERS_GENERATED,
            "Generated",
            format!("{count} parameter set(s), {count} Application(s)"),
        );
    }

    fn acted(&mut self, name: &str, action: &'static str) {
        self.actions.insert(name.to_string(), action);
    }

    /// One line of what the round did.
    pub fn summary(&self, plan: &Plan) -> String {
        let mut text = format!(
            "{} created, {} configured, {} unchanged, {} deleted",
            plan.create.len(),
            plan.update.len(),
            plan.unchanged.len(),
            plan.delete.len()
        );
        if !plan.kept.is_empty() {
            text.push_str(&format!(
                "; kept by applicationsSync: {}",
                plan.kept.join(", ")
            ));
        }
        if !plan.conflicts.is_empty() {
            text.push_str(&format!(
                "; not the set's, left alone: {}",
                plan.conflicts.join(", ")
            ));
        }
        text
    }

    /// The generated apps, with their sync and health from the cache.
    pub fn list_apps(&mut self, ctx: &Context, namespace: &str, plan: &Plan) {
        let generated: std::collections::BTreeSet<&str> = plan
            .create
            .iter()
            .chain(&plan.update)
            .filter_map(|app| app["metadata"]["name"].as_str())
            .chain(plan.unchanged.iter().map(String::as_str))
            .chain(plan.kept.iter().map(String::as_str))
            .collect();
        let known: std::collections::BTreeMap<String, Arc<StoredApplication>> =
            in_namespace(&ctx.apps, namespace)
                .map(|app| (app.metadata.name.clone().unwrap_or_default(), app))
                .collect();
        self.status.applications = generated
            .into_iter()
            .take(LISTED)
            .map(|name| {
                let status = known
                    .get(name)
                    .and_then(|app| app.decoded.as_ref().ok())
                    .and_then(|app| app.status.clone());
                GeneratedApplication {
                    name: name.to_string(),
                    action: self
                        .actions
                        .get(name)
                        .copied()
                        .unwrap_or("kept")
                        .to_string(),
                    sync: status.as_ref().map(|s| s.sync.status.to_string()),
                    health: status.as_ref().map(|s| s.health.status.to_string()),
                }
            })
            .collect();
    }

    /// Writes the status unless it says what it said; then comes back after `again`.
    pub async fn write(mut self, ctx: &Context, again: Duration) -> Result<Action, SetError> {
        self.status.revisions = std::mem::take(&mut self.revisions);
        self.status.observed_generation = self.generation;
        if self.before.as_ref() == Some(&self.status) {
            return Ok(Action::requeue(again));
        }
        let api: Api<ApplicationSet> = Api::namespaced(ctx.client.clone(), &self.namespace);
        let patch = json!({"status": self.status});
        match api
            .patch_status(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(Action::requeue(again)),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Action::await_change()),
            Err(error) => Err(SetError::Api {
                set: format!("{}/{}", self.namespace, self.name),
                step: "writing status",
                error,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> ApplicationSet {
        serde_json::from_value(json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "ApplicationSet",
            "metadata": {"name": "mono", "namespace": "tether", "uid": "u-1"},
            "spec": {"generators": [], "template": {}}
        }))
        .unwrap()
    }

    #[test]
    fn a_generated_app_is_labelled_and_owned_by_its_set() {
        let app = owned(
            json!({"metadata": {"name": "shop", "labels": {"team": "a"}}, "spec": {}}),
            &set(),
            Policy::default(),
        );
        assert_eq!(app["kind"], "Application");
        assert_eq!(app["metadata"]["namespace"], "tether");
        assert_eq!(
            app["metadata"]["labels"],
            json!({"team": "a", SET_LABEL: "mono"})
        );
        let owner = &app["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&owner["kind"], &owner["name"], &owner["uid"]),
            (&json!("ApplicationSet"), &json!("mono"), &json!("u-1"))
        );
        assert!(app["metadata"]["finalizers"].is_null());
    }

    #[test]
    fn not_preserving_resources_gives_each_app_the_cascade_finalizer_once() {
        let policy = Policy {
            preserve_resources: false,
            ..Policy::default()
        };
        let app = owned(
            json!({"metadata": {"name": "shop", "finalizers": [CASCADE_FINALIZER]}}),
            &set(),
            policy,
        );
        assert_eq!(app["metadata"]["finalizers"], json!([CASCADE_FINALIZER]));
        let bare = owned(json!({"metadata": {"name": "shop"}}), &set(), policy);
        assert_eq!(bare["metadata"]["finalizers"], json!([CASCADE_FINALIZER]));
    }
}
