//! The `ApplicationSet` custom resource: Applications generated from
//! parameter sets (see `tether_core::app_set`, which decides; this is its
//! Kubernetes form). Generators and template are stored as given and read
//! by the controller, so a set Tether cannot read is reported in its
//! status, naming the generator, rather than refused by a watch.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::application::Condition;
use super::schema::open_object_list;

// clippy reads the repeated `type_ = "string"` of the printcolumn
// arguments as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tether.dev",
    version = "v1alpha1",
    kind = "ApplicationSet",
    namespaced,
    status = "ApplicationSetStatus",
    shortname = "appset",
    category = "tether",
    doc = "Applications generated from lists, a repository's directories or the registered clusters, through one template.",
    printcolumn(
        name = "Apps",
        type_ = "integer",
        json_path = ".status.applicationCount"
    ),
    printcolumn(
        name = "Generated",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"ParametersGenerated\")].status"
    ),
    printcolumn(
        name = "UpToDate",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"ResourcesUpToDate\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSetSpec {
    /// Each one of `list` (`elements`: maps of parameter to value), `git`
    /// (`repoURL`, `revision`, `secretRef`, `directories`: globs with
    /// `exclude`; gives
    /// `path`, `path.basename`, `path[n]`), `clusters` (`selector`,
    /// `includeLocal`; gives `name`, `server`, `metadata.labels.KEY`) or
    /// `matrix` (`generators`: two of these).
    #[schemars(schema_with = "open_object_list")]
    pub generators: Vec<Value>,
    /// The Application each parameter set makes: `metadata` (`name`,
    /// `labels`, `annotations`) and `spec`, with `{{param}}` replaced.
    #[schemars(schema_with = "open_object")]
    pub template: Value,
    #[serde(default)]
    pub sync_policy: SetSyncPolicy,
}

/// What the set may do to the Applications it generated.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetSyncPolicy {
    /// Keep an app's objects in place when the set deletes the app
    /// (default true; Argo CD's default is false). `false` deletes them
    /// with the app (its `tether.dev/cascade` finalizer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preserve_resources_on_deletion: Option<bool>,
    /// As Argo CD: `sync` (create, update, delete; default),
    /// `create-only`, `create-update` (never delete), `create-delete`
    /// (never update).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "applications_sync")]
    pub applications_sync: Option<String>,
}

/// Observed state, written by the controller.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSetStatus {
    /// How many Applications the set generates now.
    pub application_count: Option<usize>,
    /// The generated Applications (at most 500), each with its sync and
    /// health as its own status last said.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applications: Vec<GeneratedApplication>,
    /// `ParametersGenerated` (False names the generator that failed, or
    /// the template parameter missing), `ResourcesUpToDate`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The commit each Git generator's repository was read at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<String>,
    pub observed_generation: Option<i64>,
}

/// One generated Application.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeneratedApplication {
    pub name: String,
    /// What the last round did: created, configured, unchanged.
    pub action: String,
    pub sync: Option<String>,
    pub health: Option<String>,
}

/// The condition saying whether the generators made their parameters and
/// the template its Applications.
pub const PARAMETERS_GENERATED: &str = "ParametersGenerated";
/// The condition saying whether every generated Application is as
/// generated.
pub const RESOURCES_UP_TO_DATE: &str = "ResourcesUpToDate";

fn open_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

fn applications_sync(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string",
        "enum": ["sync", "create-only", "create-update", "create-delete"]})
}

impl SetSyncPolicy {
    /// The policy `tether_core::app_set::plan` decides with.
    pub fn policy(&self) -> tether_core::app_set::Policy {
        let mode = self
            .applications_sync
            .as_deref()
            .and_then(|mode| serde_json::from_value(Value::String(mode.into())).ok())
            .unwrap_or_default();
        tether_core::app_set::Policy {
            mode,
            preserve_resources: self.preserve_resources_on_deletion.unwrap_or(true),
        }
    }
}
