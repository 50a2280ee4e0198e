//! The `Project` custom resource: what the Applications of some
//! namespaces may read and change (see `tether_core::project`, which
//! decides; this is its Kubernetes form). Cluster-scoped, so only cluster
//! administrators write Projects; tenants only name theirs.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tether_core::project::Rules;

// clippy reads the repeated `type_ = "string"` of the printcolumn
// arguments as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "tether.dev",
    version = "v1alpha1",
    kind = "Project",
    shortname = "proj",
    category = "tether",
    doc = "Which namespaces' Applications a project holds, and the repositories, namespaces and kinds they may use.",
    printcolumn(
        name = "Namespaces",
        type_ = "string",
        json_path = ".spec.applicationNamespaces"
    ),
    printcolumn(
        name = "Description",
        type_ = "string",
        json_path = ".spec.description"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProjectSpec {
    /// What the project is for, in a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The rules (see `tether_core::project::Rules`).
    #[serde(flatten)]
    #[schemars(schema_with = "super::schema::project_rules")]
    pub rules: Rules,
}

impl Project {
    /// The name and rules `tether_core::project` decides with.
    pub fn named_rules(&self) -> (String, Rules) {
        (
            self.metadata.name.clone().unwrap_or_default(),
            self.spec.rules.clone(),
        )
    }
}
