//! Server-side apply, for real or as a dry-run. An object that leaves its
//! name to the API server (`generateName`, see `tether_core::generated`)
//! cannot be applied: it is created instead.

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;
use tether_core::generated::generate_name;
use tether_core::tracking::FIELD_MANAGER;
use tether_core::{Action, ObjectRef};

use crate::ClusterError;
use crate::resources::Resources;

/// What one apply did.
#[derive(Debug, Clone)]
pub struct Applied {
    pub object: ObjectRef,
    pub action: Action,
    /// The object as the API server returned it (after defaulting).
    pub live: Value,
}

/// Applies objects with server-side apply as field manager `tether`,
/// taking ownership of conflicting fields (that is what reverts a manual
/// edit of a field Git sets).
#[derive(Clone)]
pub struct Applier {
    resources: Resources,
    default_namespace: String,
}

impl Applier {
    /// Objects without a namespace that need one are put in `default_namespace`.
    pub fn new(resources: Resources, default_namespace: impl Into<String>) -> Self {
        Applier {
            resources,
            default_namespace: default_namespace.into(),
        }
    }

    pub fn resources(&self) -> &Resources {
        &self.resources
    }

    /// The identity `object` will have once applied (namespace defaulted
    /// for namespaced kinds, removed for cluster-scoped ones).
    pub async fn identify(&self, object: &Value) -> Result<ObjectRef, ClusterError> {
        let declared = declared_identity(object)?;
        let served = self.resources.resolve(&declared, object).await?;
        Ok(if served.namespaced {
            declared.in_namespace(&self.default_namespace)
        } else {
            ObjectRef {
                namespace: None,
                ..declared
            }
        })
    }

    /// Applies `object`; with `dry_run` the API server validates, defaults
    /// and admits it but persists nothing.
    pub async fn apply(&self, object: &Value, dry_run: bool) -> Result<Applied, ClusterError> {
        if generate_name(object).is_some() {
            return self.create(object, dry_run).await;
        }
        let id = self.identify(object).await?;
        let api = self.api_for(&id, object).await?;
        let request_error = |step| request_error(&id, step);
        let before = api.get_opt(&id.name).await.map_err(request_error("read"))?;
        let mut params = PatchParams::apply(FIELD_MANAGER).force();
        if dry_run {
            params = params.dry_run();
        }
        let body = with_namespace(object, &id);
        let step = if dry_run { "dry-run apply" } else { "apply" };
        let after = api
            .patch(&id.name, &params, &Patch::Apply(&body))
            .await
            .map_err(request_error(step))?;
        let action = match &before {
            None => Action::Created,
            Some(before) if dry_run => {
                if same_content(before, &after) {
                    Action::Unchanged
                } else {
                    Action::Configured
                }
            }
            Some(before) => Action::of_apply(
                before.metadata.resource_version.as_deref(),
                after
                    .metadata
                    .resource_version
                    .as_deref()
                    .unwrap_or_default(),
            ),
        };
        let live = serde_json::to_value(&after).unwrap_or(Value::Null);
        Ok(Applied {
            object: id,
            action,
            live,
        })
    }

    /// Applies `object` as a server-side dry-run and returns the object the
    /// API server would store: validated, defaulted and admitted, nothing
    /// persisted. One request (no read first: the caller has live state).
    pub async fn dry_run(&self, object: &Value) -> Result<Value, ClusterError> {
        if generate_name(object).is_some() {
            return Ok(self.create(object, true).await?.live);
        }
        let id = self.identify(object).await?;
        let api = self.api_for(&id, object).await?;
        let body = with_namespace(object, &id);
        let params = PatchParams::apply(FIELD_MANAGER).force().dry_run();
        let predicted = api
            .patch(&id.name, &params, &Patch::Apply(&body))
            .await
            .map_err(request_error(&id, "dry-run apply"))?;
        Ok(serde_json::to_value(&predicted).unwrap_or(Value::Null))
    }

    /// The live copy of `object`, if it exists (one GET; the controller
    /// reads from watch caches instead).
    pub async fn get(&self, object: &Value) -> Result<Option<Value>, ClusterError> {
        if generate_name(object).is_some() {
            return Ok(None);
        }
        let id = self.identify(object).await?;
        let api = self.api_for(&id, object).await?;
        let live = api
            .get_opt(&id.name)
            .await
            .map_err(request_error(&id, "read"))?;
        Ok(live.map(|live| serde_json::to_value(live).unwrap_or(Value::Null)))
    }

    /// Applies `object` without reading it first: the caller knows the
    /// resourceVersion it had (`None`: absent), e.g. from a watch cache. One
    /// request; used to re-apply an object whose desired state already
    /// passed validation.
    pub async fn apply_over(
        &self,
        object: &Value,
        known_version: Option<&str>,
    ) -> Result<Applied, ClusterError> {
        if generate_name(object).is_some() {
            return self.create(object, false).await;
        }
        let id = self.identify(object).await?;
        let api = self.api_for(&id, object).await?;
        let body = with_namespace(object, &id);
        let after = api
            .patch(
                &id.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(request_error(&id, "apply"))?;
        let action = Action::of_apply(
            known_version,
            after
                .metadata
                .resource_version
                .as_deref()
                .unwrap_or_default(),
        );
        Ok(Applied {
            object: id,
            action,
            live: serde_json::to_value(&after).unwrap_or(Value::Null),
        })
    }

    /// Creates `object`, which leaves its name to the API server (one POST,
    /// as field manager `tether`); the result names the object created.
    async fn create(&self, object: &Value, dry_run: bool) -> Result<Applied, ClusterError> {
        let declared = self.identify(object).await?;
        let api = self.api_for(&declared, object).await?;
        let step = if dry_run { "dry-run create" } else { "create" };
        let body: DynamicObject = serde_json::from_value(with_namespace(object, &declared))
            .map_err(|error| request_error(&declared, step)(kube::Error::SerdeError(error)))?;
        let params = PostParams {
            dry_run,
            field_manager: Some(FIELD_MANAGER.to_string()),
        };
        let created = api
            .create(&params, &body)
            .await
            .map_err(request_error(&declared, step))?;
        let object = ObjectRef {
            name: created.metadata.name.clone().unwrap_or_default(),
            ..declared
        };
        Ok(Applied {
            object,
            action: Action::Created,
            live: serde_json::to_value(&created).unwrap_or(Value::Null),
        })
    }

    /// The dynamic API of `id`'s kind (`object` gives its apiVersion).
    pub async fn api_for(
        &self,
        id: &ObjectRef,
        object: &Value,
    ) -> Result<Api<DynamicObject>, ClusterError> {
        let served = self.resources.resolve(id, object).await?;
        let client = self.resources.client().clone();
        Ok(match &id.namespace {
            Some(namespace) if served.namespaced => {
                Api::namespaced_with(client, namespace, &served.resource)
            }
            _ => Api::all_with(client, &served.resource),
        })
    }
}

/// `object` with the namespace it is applied in (the default one when it
/// declares none).
fn with_namespace(object: &Value, id: &ObjectRef) -> Value {
    let mut body = object.clone();
    if let Some(namespace) = &id.namespace {
        body["metadata"]["namespace"] = Value::String(namespace.clone());
    }
    body
}

fn declared_identity(object: &Value) -> Result<ObjectRef, ClusterError> {
    ObjectRef::from_object(object).map_err(|cause| ClusterError::Manifest {
        object: ObjectRef {
            group: String::new(),
            kind: object
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("object")
                .to_string(),
            namespace: None,
            name: object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("<unnamed>")
                .to_string(),
        },
        cause,
    })
}

/// Whether a dry-run result differs from the stored object in anything but
/// bookkeeping the server rewrites on every write.
fn same_content(before: &DynamicObject, after: &DynamicObject) -> bool {
    let strip = |object: &DynamicObject| {
        let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
        if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in ["managedFields", "resourceVersion", "generation"] {
                metadata.remove(field);
            }
        }
        value
    };
    strip(before) == strip(after)
}

/// The error of request `step` about `object`, for `map_err`.
fn request_error(
    object: &ObjectRef,
    step: &'static str,
) -> impl FnOnce(kube::Error) -> ClusterError {
    let object = object.clone();
    move |error| ClusterError::Request {
        object,
        step,
        error,
    }
}
