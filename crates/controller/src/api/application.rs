//! The `Application` custom resource: one Git source kept in one namespace.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tether_core::attribution::OtherWriter;
use tether_core::diff::IgnoreRule;
use tether_core::drift::DriftOutcome;
use tether_core::drift::DriftRecord;
use tether_core::hook::{HookOutcome, HookPhase};
use tether_core::prune::PruneFate;
use tether_core::{Action, HealthStatus, Initiator, OperationPhase, OperationalState, SyncStatus};
use tether_source::Source;

pub use super::inventory::InventoryEntry;
use super::schema::word;

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
    #[schemars(schema_with = "super::schema::source")]
    pub source: Source,
    /// Several sources as one desired state (Argo CD's multi-source): a
    /// chart from a Helm repository or registry with its values from Git
    /// (a source named `values` read as `$values/…` in the chart's
    /// `valueFiles`), or several directories. One diff, one all-or-nothing
    /// apply, one status; each source's revision is recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "super::schema::sources")]
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
    #[schemars(schema_with = "super::schema::ignore_rules")]
    pub ignore_differences: Vec<IgnoreRule>,
    /// How this Application's objects are judged healthy.
    #[serde(default, skip_serializing_if = "HealthSpec::is_empty")]
    pub health: HealthSpec,
    /// Held at an earlier revision by a rollback (`tether rollback`):
    /// fetched and rendered instead of the branch head until removed
    /// (`tether rollback --clear`), or until the branch head renders the
    /// same objects (a revert commit landed). Condition `Pinned` says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<super::pin::Pin>,
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
    #[schemars(schema_with = "super::schema::health_rules")]
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
    #[schemars(schema_with = "super::schema::prune_propagation")]
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
    #[schemars(schema_with = "super::schema::sync_windows")]
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

/// Observed state, written by Tether through the status subresource.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationStatus {
    #[serde(default)]
    pub sync: SyncInfo,
    #[serde(default)]
    pub health: HealthInfo,
    /// The operational state named by the Synced × Healthy matrix:
    /// Converged, AppliedButFailing, DriftedOrPending or Broken.
    // Optional: a schema of its own does not say so.
    #[serde(default)]
    #[schemars(schema_with = "word::<OperationalState>")]
    pub state: Option<OperationalState>,
    /// The Project that holds the app, as the controller last judged it;
    /// absent while no Project applies to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// The Kubernetes user the app's changes are made as
    /// (`system:serviceaccount:NS:NAME`); absent for the controller's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applies_as: Option<String>,
    /// The controller replica that last reconciled the app (its identity
    /// in the shard Leases); set when the controller runs sharded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<String>,
    /// Sync and health per object: every object that is not Synced and
    /// Healthy, then the others, at most 200 (`resourceCount` has them all;
    /// the inventory lists every object).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceStatus>,
    /// How many objects the app has; more than `resources` lists when
    /// that list is cut.
    pub resource_count: Option<usize>,
    /// Objects that differ from Git now, by kind (Manual, Accidental,
    /// Emergency), with the fields and their writers; at most 50.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "open_object_list")]
    pub drift: Vec<DriftEntry>,
    /// Recently resolved drift (reverted or gone), newest first; at most 10.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "open_object_list")]
    pub last_drift: Vec<DriftEntry>,
    /// Field managers other than Tether that still own fields of managed
    /// objects — "the controller is the only writer" audited: object,
    /// manager, operation, subresource, time, how many fields and the first
    /// of them. Most recent first; at most 20. A writer whose every field
    /// was reverted no longer owns any and drops off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "open_object_list")]
    pub other_writers: Vec<OtherWriterEntry>,
    /// Objects of the inventory that Git no longer has, and their fate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orphans: Vec<OrphanStatus>,
    /// Every object Tether applied for this app (prune's source of truth);
    /// stored grouped by group, version, kind and namespace (see
    /// [`super::inventory`]), complete however many objects the app has.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "super::inventory"
    )]
    #[schemars(schema_with = "super::inventory::schema")]
    pub inventory: Vec<InventoryEntry>,
    /// Objects the API server named (`generateName`): the name and UID each
    /// desired object got when Tether created it, once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generated: Vec<GeneratedEntry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    pub operation_state: Option<OperationState>,
    /// The last 10 syncs, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryEntry>,
    pub observed_generation: Option<i64>,
    pub reconciled_at: Option<String>,
}

/// Does live match Git, and at which revision?
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncInfo {
    /// Synced, OutOfSync or Unknown.
    #[serde(default)]
    #[schemars(schema_with = "word::<SyncStatus>")]
    pub status: SyncStatus,
    /// The commit live state was last synced to.
    pub revision: Option<String>,
    /// The commit (and path tree) live state was last compared with.
    pub compared_to: Option<String>,
    /// SHA-256 of the rendered objects synced at `revision`: a later commit
    /// rendering the same objects (a change elsewhere in a monorepo) is
    /// recorded as the synced revision without a sync.
    pub objects_digest: Option<String>,
    /// Since when (RFC 3339) the app has not been Synced — out of sync,
    /// or a step of its reconcile failing; absent while it is Synced. Kept
    /// across controller restarts, so the `NotSyncedTooLong` alert counts
    /// from the first reconcile that found it so.
    pub not_synced_since: Option<String>,
    /// What each source resolved to when live state was last compared (a
    /// chart's version and digest, a Git source's commit and path tree),
    /// in the order of `spec.sources`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceStatus>,
}

/// One source's resolved revision.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(rename = "repoURL")]
    pub repo_url: String,
    /// Its chart name, for a chart source.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub chart: String,
    /// The commit, or the chart version.
    pub revision: String,
    /// The path's tree, or the chart archive's `sha256:` digest.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub digest: String,
}

/// Are the applied objects working?
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthInfo {
    /// Healthy, Progressing, Degraded, Suspended, Missing or Unknown.
    #[serde(default)]
    #[schemars(schema_with = "word::<HealthStatus>")]
    pub status: HealthStatus,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Sync and health of one managed object.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceStatus {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    #[schemars(schema_with = "word::<SyncStatus>")]
    pub sync: SyncStatus,
    pub health: Option<HealthInfo>,
    /// A one-line drift summary: which fields differ and who wrote them.
    pub drift: Option<String>,
}

/// A drift record (see `tether_core::drift::DriftRecord`) and what Tether
/// did about it.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DriftEntry {
    #[serde(flatten)]
    pub record: DriftRecord,
    /// Healed (reverted), Reported (warn mode, self-heal off or opted out)
    /// or BackedOff (the flap guard stopped reverting).
    pub response: DriftOutcome,
    /// When the drift was reverted (or otherwise resolved).
    pub resolved_at: Option<String>,
}

/// Another writer of one managed object.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OtherWriterEntry {
    /// `Kind namespace/name`.
    pub object: String,
    #[serde(flatten)]
    pub writer: OtherWriter,
}

/// An object in the inventory that Git no longer has.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrphanStatus {
    /// `Kind namespace/name`.
    pub object: String,
    /// Deleted, or why it is kept.
    #[schemars(with = "String")]
    pub prune: PruneFate,
}

/// An object the API server named (`generateName`), created once for the
/// desired content its key stands for (`tether_core::generated`).
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GeneratedEntry {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub generate_name: String,
    /// The key of the desired content (`tether.dev/generated-from`).
    pub key: String,
    /// The name the API server gave it.
    pub name: String,
    pub uid: String,
}

/// A condition in the Kubernetes convention; one reason per failing step
/// (FetchFailed, VerifyFailed, RenderFailed, DiffFailed, ValidationFailed,
/// ApplyFailed …).
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    #[serde(default)]
    pub message: String,
    pub last_transition_time: Option<String>,
}

/// Sets condition `type_` of `conditions` to `value` (`True`, `False`),
/// for `reason`; its transition time moves to `now` only when `value`
/// changes (or the condition is new).
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    value: &str,
    reason: &str,
    message: String,
    now: &str,
) {
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if existing.status != value {
            existing.last_transition_time = Some(now.to_string());
        }
        existing.status = value.into();
        existing.reason = reason.into();
        existing.message = message;
        return;
    }
    conditions.push(Condition {
        type_: type_.into(),
        status: value.into(),
        reason: reason.into(),
        message,
        last_transition_time: Some(now.to_string()),
    });
}

/// The last (or running) sync operation.
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationState {
    /// Running, Succeeded or Failed.
    #[schemars(schema_with = "word::<OperationPhase>")]
    pub phase: OperationPhase,
    #[serde(default)]
    pub message: String,
    pub revision: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// What the sync did to each object (for a failed sync: what it had
    /// applied before it stopped half-way): changes first, `unchanged`
    /// last, at most 200.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    /// Outcomes left out of `changes` to keep status small.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub changes_omitted: usize,
    /// Set while a sync with `waitForWaves` waits for a wave to become
    /// healthy, or while a hook runs: the sync resumes at the next
    /// reconcile (no worker is held meanwhile), and gives up
    /// `waveTimeoutSeconds` (a hook: its `tether.dev/hook-timeout`) after
    /// `since`.
    pub waiting: Option<WaveWait>,
    /// The sync hooks this operation ran, in the order they ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookRun>,
}

/// One sync hook of an operation (`tether_core::hook`).
#[serde_with::skip_serializing_none]
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookRun {
    /// `Kind namespace/name`, as created.
    pub name: String,
    /// The `metadata.generateName` it was created from, if any.
    pub generate_name: Option<String>,
    #[schemars(schema_with = "word::<HookPhase>")]
    pub phase: HookPhase,
    /// Running, Succeeded or Failed.
    #[schemars(schema_with = "word::<HookOutcome>")]
    pub outcome: HookOutcome,
    /// Why it failed, or what it is doing while it runs.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    pub started_at: String,
    pub finished_at: Option<String>,
}

/// The wave a running sync waits for.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaveWait {
    /// The wave applied and not yet healthy.
    pub wave: i32,
    /// The first object holding it back, and its health.
    pub object: String,
    /// When the wait began (RFC 3339).
    pub since: String,
    /// Set when it is a hook that runs, not a wave: the hook's phase
    /// (`wave` is then 0 and means nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "optional_hook_phase")]
    pub hook: Option<HookPhase>,
}

fn optional_hook_phase(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    word::<HookPhase>(generator)
}

/// One object's outcome in a sync.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// `Kind namespace/name`.
    pub object: String,
    #[schemars(schema_with = "word::<Action>")]
    pub action: Action,
}

/// One past sync.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// The entry's number, one more than the newest before it
    /// (`tether rollback --to ID`); 0 on entries written before ids.
    #[serde(default, skip_serializing_if = "is_zero_id")]
    pub id: u64,
    pub revision: String,
    pub time: String,
    /// Who or what started it: `automated`, `self-heal`, `user`,
    /// `rollback` or `unpin`.
    #[schemars(schema_with = "word::<Initiator>")]
    pub initiator: Initiator,
    /// The sync hooks it ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookRun>,
    /// Who rolled back (or lifted a pin), for `rollback` and `unpin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Why: the rollback's `--reason`, or why a pin was lifted
    /// (`GitMatches`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl HistoryEntry {
    /// The id the next entry of `history` (newest first) gets.
    pub fn next_id(history: &[HistoryEntry]) -> u64 {
        history.iter().map(|entry| entry.id).max().unwrap_or(0) + 1
    }
}

fn is_zero_id(id: &u64) -> bool {
    *id == 0
}

/// The schema of a list whose items are defined (and validated) by the crate
/// that owns them: objects the API server stores as given.
pub(crate) fn open_object_list(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array", "items":
        {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
}

fn is_zero(n: &usize) -> bool {
    *n == 0
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
