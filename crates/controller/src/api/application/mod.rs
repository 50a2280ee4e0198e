//! The `Application` custom resource: one Git source kept in one namespace.

mod status;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tether_core::diff::IgnoreRule;
use tether_source::Source;

pub use super::inventory::InventoryEntry;
pub use status::{
    ApplicationStatus, Change, Condition, DriftEntry, GeneratedEntry, HealthInfo, HistoryEntry,
    HookRun, OperationState, OrphanStatus, OtherWriterEntry, ResourceStatus, SourceStatus,
    SyncInfo, WaveWait, condition, condition_with, holds, set_condition,
};

/// Desired state: where it comes from (`source`), where it goes
/// (`destination`) and how Tether keeps the two together (`syncPolicy`).
// clippy reads the repeated `type_ = "string"` of the printcolumn
// arguments as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "tether.dev",
    version = "v1alpha1",
    kind = "Application",
    namespaced,
    status = "ApplicationStatus",
    shortname = "app",
    category = "tether",
    doc = "A Git source reconciled continuously into a namespace.",
    printcolumn(name = "Sync", type_ = "string", json_path = ".status.sync.status"),
    printcolumn(name = "Health", type_ = "string", json_path = ".status.health.status"),
    printcolumn(name = "State", type_ = "string", json_path = ".status.state"),
    printcolumn(
        name = "Revision",
        type_ = "string",
        json_path = ".status.sync.revision"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSpec {
    /// Where the desired state lives and how it is rendered (see
    /// `tether_source::Source`: repoURL, revision, path, renderer, verify).
    /// Exactly one of `source` and `sources` is given.
    #[serde(default, skip_serializing_if = "Source::is_unset")]
    #[schemars(schema_with = "crate::api::schema::source")]
    pub source: Source,
    /// Several sources as one desired state (Argo CD's multi-source): a
    /// chart from a Helm repository or registry with its values from Git
    /// (a source named `values` read as `$values/…` in the chart's
    /// `valueFiles`), or several directories. One diff, one all-or-nothing
    /// apply, one status; each source's revision is recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::schema::sources")]
    pub sources: Vec<Source>,
    pub destination: Destination,
    /// The ServiceAccount, in this Application's own namespace, that every
    /// dry run, apply and prune for this app is made as (Kubernetes
    /// impersonation): RBAC decides what the app may change. Default:
    /// `tether run --default-service-account`, else the controller's own
    /// identity (refused under `--require-service-account`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
        length(max = 253)
    )]
    pub service_account_name: Option<String>,
    /// The Project (`tether_core::project`) that holds this app: it must
    /// claim the app's namespace. Default: the one Project that does, else
    /// `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
        length(max = 253)
    )]
    pub project: Option<String>,
    /// Applications this one waits for (as Flux's `dependsOn`): it syncs
    /// only once each is Synced and Healthy at its current spec; until
    /// then `Reconciled` says `WaitingForDependency` and names them. A
    /// cycle is refused (`DependencyCycle`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<Dependency>,
    #[serde(default)]
    pub sync_policy: SyncPolicy,
    /// Fields another writer owns (e.g. `spec.replicas` under an HPA):
    /// never drift, never reverted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::schema::ignore_rules")]
    pub ignore_differences: Vec<IgnoreRule>,
    /// How this Application's objects are judged healthy.
    #[serde(default, skip_serializing_if = "HealthSpec::is_empty")]
    pub health: HealthSpec,
    /// Held at an earlier revision by a rollback (`tether rollback`):
    /// fetched and rendered instead of the branch head until removed
    /// (`tether rollback --clear`), or until the branch head renders the
    /// same objects (a revert commit landed). Condition `Pinned` says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<crate::api::pin::Pin>,
}

impl ApplicationSpec {
    /// The source `tether adopt` writes to: the first Git source that
    /// renders (the one `source` of a single-source app).
    pub fn adopt_source(&self) -> &Source {
        let sources = self.sources();
        sources
            .iter()
            .find(|source| !source.is_chart() && source.renders())
            .copied()
            .unwrap_or(sources[0])
    }

    /// The sources: `sources`, or the one `source`.
    pub fn sources(&self) -> Vec<&Source> {
        match self.sources.is_empty() {
            true => vec![&self.source],
            false => self.sources.iter().collect(),
        }
    }
}

/// Health rules for this Application only, over the cluster's rules (the
/// `tether-health-rules` ConfigMap) and the shipped ones.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthSpec {
    /// CEL health rules, each as one entry of a rules file: `group`,
    /// `kinds`, and CEL expressions `suspended`, `degraded`, `progressing`,
    /// `healthy`, `message` (see `tether_core::health::rules::file`). A
    /// rule that does not compile is left out and reported in the
    /// `HealthRules` condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::schema::health_rules")]
    pub rules: Vec<serde_json::Value>,
}

impl Application {
    /// The objects the app owns, as its status records them; none before
    /// its first status.
    pub fn inventory(&self) -> &[InventoryEntry] {
        self.status
            .as_ref()
            .map(|s| s.inventory.as_slice())
            .unwrap_or_default()
    }
}

impl HealthSpec {
    fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// An Application another waits for.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Dependency {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Its namespace (default: the waiting Application's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Where the desired objects go.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Destination {
    /// The registered cluster the objects go to (a Secret labelled
    /// `tether.dev/cluster: "true"` in the controller's namespace; see
    /// `tether cluster add`). None: the cluster Tether runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub cluster: Option<String>,
    /// Namespace for objects that do not name one.
    #[schemars(length(min = 1))]
    pub namespace: String,
    /// Other namespaces this app's objects may name. A namespaced object
    /// in any namespace but `namespace` and these refuses the whole
    /// commit (`NamespaceNotAllowed`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_namespaces: Vec<String>,
}

impl Destination {
    /// Whether objects of this app may live in `namespace`.
    pub fn allows(&self, namespace: &str) -> bool {
        namespace == self.namespace || self.allow_namespaces.iter().any(|n| n == namespace)
    }
}

/// How Tether keeps live state tethered to Git.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncPolicy {
    /// Apply new commits without being asked (default true).
    #[serde(default = "yes")]
    pub automated: bool,
    /// Revert changes made outside Git (default true). `false` reports
    /// drift and leaves it, like `driftResponse: warn`.
    #[serde(default = "yes")]
    pub self_heal: bool,
    /// What to do about drift: `heal` (revert it) or `warn` (record it,
    /// emit a Warning event, never revert). Overrides `selfHeal` when set.
    pub drift_response: Option<DriftResponse>,
    /// Delete objects removed from Git (default false: the footgun is off).
    #[serde(default)]
    pub prune: bool,
    /// How deletions propagate to dependents (default background).
    #[serde(default)]
    #[schemars(schema_with = "crate::api::schema::prune_propagation")]
    pub prune_propagation: Option<PrunePropagation>,
    /// The largest share of the inventory, in percent, one prune may delete
    /// without `tether sync APP --allow-mass-prune` (default 50).
    pub prune_max_percent: Option<u8>,
    #[serde(default)]
    pub retry: Retry,
    /// Apply sync waves (`tether.dev/sync-wave`) one at a time, each only
    /// once every object of the wave before it is healthy (default false:
    /// waves only order the applies, as the benchmarks expect).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait_for_waves: bool,
    /// With `waitForWaves`: how long one wave may take to become healthy
    /// before the sync fails, naming the object (default 300).
    pub wave_timeout_seconds: Option<u32>,
    /// Take over objects that exist already and that Tether did not create
    /// (default false: such an object refuses the commit with
    /// `OwnershipConflict`). One object can opt in alone with the
    /// annotation `tether.dev/adopt: "true"` in Git. Never takes an object
    /// another Application manages.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopt_existing: bool,
    /// Let prune delete adopted objects too (default false: an object that
    /// existed before Tether took it over is never deleted by Tether).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prune_adopted: bool,
    /// Create the destination namespace when it does not exist (Argo CD's
    /// `CreateNamespace=true`; default false). It is labelled
    /// `app.kubernetes.io/managed-by: tether` but not as this app's, so
    /// prune never deletes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub create_namespace: bool,
    /// How long the app may stay not Synced before the condition
    /// `NotSyncedTooLong` is raised (an Event, a notification, and the
    /// metric `tether_app_not_synced_too_long`): a duration such as `90s`,
    /// `15m`, `1h`. Default: `tether run --alert-not-synced-after` (1h).
    #[schemars(regex(pattern = r"^([0-9]+[dhms])+$"))]
    pub alert_not_synced_after: Option<String>,
    /// When automated syncs and self-heal may run (`allow`) or may not
    /// (`deny`), as Argo CD's sync windows: inside a deny window, or
    /// outside every allow window, drift is recorded but not reverted and
    /// new commits wait; condition `SyncWindow` says which window and
    /// until when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::schema::sync_windows")]
    pub sync_windows: Vec<tether_core::sync_window::WindowSpec>,
}

impl SyncPolicy {
    /// How long the app may stay not Synced before the alert: its
    /// `alertNotSyncedAfter`, else `default` (also when the API server
    /// let an unreadable value through: its schema refuses one).
    pub fn alert_after(&self, default: std::time::Duration) -> std::time::Duration {
        self.alert_not_synced_after
            .as_deref()
            .and_then(|text| tether_core::window::parse_ttl(text).ok())
            .unwrap_or(default)
    }

    /// How long a wave may take to become healthy, with `waitForWaves`.
    pub fn wave_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.wave_timeout_seconds.unwrap_or(300).into())
    }

    /// Whether drift is reverted (else only reported).
    pub fn heals(&self) -> bool {
        match self.drift_response {
            Some(response) => response == DriftResponse::Heal,
            None => self.self_heal,
        }
    }

    /// The share of the inventory one prune may delete, 0.0–1.0.
    pub fn prune_max_share(&self) -> f64 {
        f64::from(self.prune_max_percent.unwrap_or(50).min(100)) / 100.0
    }
}

/// The response to drift.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DriftResponse {
    /// Revert drifted fields to Git's values.
    Heal,
    /// Report drift (status, Warning event), never revert.
    Warn,
}

/// Kubernetes deletion propagation for pruned objects.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PrunePropagation {
    Foreground,
    #[default]
    Background,
    Orphan,
}

// The condition types of an Application's status.

/// The condition every reconcile sets: True, or False with the failed
/// `Step` as its reason.
pub const RECONCILED_CONDITION: &str = "Reconciled";
/// Condition raised while the flap guard keeps Tether from reverting.
pub const BACK_OFF_CONDITION: &str = "SelfHealBackOff";
/// Condition raised while a sync window keeps automated syncs and
/// self-heal from running; its message names the window and until when.
pub const SYNC_WINDOW_CONDITION: &str = "SyncWindow";
/// Condition raised while a prune circuit breaker holds deletions back.
pub const PRUNE_BLOCKED_CONDITION: &str = "PruneBlocked";
/// Condition raised while objects carry Argo CD annotations Tether does not
/// act on (`tether_core::argocd`); its message names each object and
/// annotation and what Tether does instead.
pub const UNSUPPORTED_CONDITION: &str = "Unsupported";
/// Condition raised while the app has not been Synced for longer than its
/// `syncPolicy.alertNotSyncedAfter` (product rule 5); its message says for
/// how long and why.
pub const NOT_SYNCED_TOO_LONG_CONDITION: &str = "NotSyncedTooLong";

/// Annotation on an Application asking for a sync now (`tether sync APP`);
/// the value is the request time. Cleared by the controller once handled.
pub const SYNC_REQUEST_ANNOTATION: &str = "tether.dev/sync-requested-at";
/// Annotation on an Application, with [`SYNC_REQUEST_ANNOTATION`], naming
/// the branch, tag or commit to sync to this once (`tether sync APP
/// --revision R`). Cleared once handled.
pub const SYNC_REVISION_ANNOTATION: &str = "tether.dev/sync-revision";
/// Annotation on an Application confirming a prune the circuit breaker
/// stopped (`tether sync APP --allow-mass-prune`). Cleared once handled.
pub const ALLOW_MASS_PRUNE_ANNOTATION: &str = "tether.dev/allow-mass-prune";
/// The label on the namespaces Tether creates (`syncPolicy.createNamespace`).
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The annotation naming the Application a namespace was created for.
pub const CREATED_FOR_ANNOTATION: &str = "tether.dev/created-for";
/// The finalizer that deletes an Application's objects before it
/// (`tether app delete --cascade`; Argo CD's
/// `resources-finalizer.argocd.argoproj.io`).
pub const CASCADE_FINALIZER: &str = "tether.dev/cascade";
/// Per-object opt-out from self-heal: `tether.dev/self-heal: disabled`.
pub const SELF_HEAL_ANNOTATION: &str = "tether.dev/self-heal";

impl Default for SyncPolicy {
    fn default() -> Self {
        SyncPolicy {
            automated: true,
            self_heal: true,
            drift_response: None,
            prune: false,
            prune_propagation: None,
            prune_max_percent: None,
            retry: Retry::default(),
            wait_for_waves: false,
            wave_timeout_seconds: None,
            adopt_existing: false,
            prune_adopted: false,
            create_namespace: false,
            alert_not_synced_after: None,
            sync_windows: Vec::new(),
        }
    }
}

/// Retries of a failed sync, with exponential backoff.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// Attempts per revision before waiting for a new commit (default 5).
    #[serde(default = "default_retry_limit")]
    pub limit: u32,
    /// First backoff, in seconds (default 5), doubled per attempt.
    #[serde(default = "default_backoff_seconds")]
    pub backoff_seconds: u32,
    /// Longest backoff, in seconds (default 300).
    #[serde(default = "default_max_backoff_seconds")]
    pub max_backoff_seconds: u32,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            limit: default_retry_limit(),
            backoff_seconds: default_backoff_seconds(),
            max_backoff_seconds: default_max_backoff_seconds(),
        }
    }
}

fn yes() -> bool {
    true
}

fn default_retry_limit() -> u32 {
    5
}

fn default_backoff_seconds() -> u32 {
    5
}

fn default_max_backoff_seconds() -> u32 {
    300
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn a_minimal_application_gets_self_heal_on_and_prune_off() {
        let app: Application = serde_json::from_value(serde_json::json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": "shop", "namespace": "tether"},
            "spec": {"source": {"repoURL": "file:///srv/git/shop.git"},
                     "destination": {"namespace": "shop"}}
        }))
        .unwrap();
        assert!(app.spec.sync_policy.automated);
        assert!(app.spec.sync_policy.self_heal);
        assert!(!app.spec.sync_policy.prune);
        assert!(app.spec.sync_policy.heals());
        assert_eq!(app.spec.sync_policy.prune_max_share(), 0.5);
        assert_eq!(app.spec.sync_policy.retry.limit, 5);
    }

    #[test]
    fn self_heal_false_and_warn_mode_both_only_report() {
        let policy = |value| serde_json::from_value::<SyncPolicy>(value).unwrap();
        assert!(!policy(serde_json::json!({"selfHeal": false})).heals());
        assert!(!policy(serde_json::json!({"driftResponse": "warn"})).heals());
        assert!(policy(serde_json::json!({"selfHeal": false, "driftResponse": "heal"})).heals());
    }

    #[test]
    fn the_crd_has_a_status_subresource_and_printer_columns() {
        let crd = serde_json::to_value(Application::crd()).unwrap();
        let version = &crd["spec"]["versions"][0];
        assert!(version["subresources"]["status"].is_object());
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(columns, ["Sync", "Health", "State", "Revision", "Age"]);
    }
}
