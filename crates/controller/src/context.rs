//! What every reconcile shares: clients, caches and memory of past work.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;
use kube::runtime::events::Reporter;

use crate::recorder::Recorder;
use kube::runtime::reflector::Store;
use tether_core::drift::{FlapGuard, FlapPolicy};
use tether_source::Repositories;

use crate::api::{ApplicationStatus, BreakGlass, Project};
use crate::break_glass::audit::AuditLog;
use crate::break_glass::key::AuditKey;
use crate::clusters::Clusters;
use crate::metrics::Metrics;
use crate::observe::health::HealthRules;
use crate::observe::live::AppKey;
use crate::observe::memo::AppMemo;
use crate::report::writes::StatusWrites;

/// The pod a replica runs in (the downward API's `POD_NAMESPACE` and
/// `POD_NAME`), labelled `tether.dev/leader` while it leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaPod {
    pub namespace: String,
    pub name: String,
}

/// How the controller runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Safety-net resync of every application (jittered ±10%).
    pub resync: Duration,
    /// How often a repository is asked whether an app's revision moved,
    /// for apps whose `spec.source.interval` says nothing (default 3m).
    pub poll_interval: Duration,
    /// Applications reconciled at once.
    pub concurrency: u16,
    /// Where Git object stores live.
    pub cache_dir: PathBuf,
    /// Namespace of the leader-election Lease, which is the controller's
    /// namespace: the cluster's health rules ConfigMap is read from it.
    pub lease_namespace: String,
    /// This replica's identity in the Lease.
    pub identity: String,
    /// The pod this replica runs in, labelled while it leads.
    pub pod: Option<ReplicaPod>,
    /// Reconcile only the Applications in this namespace (default: all).
    pub watch_namespace: Option<String>,
    /// Read repository credentials only in these namespaces (default:
    /// the watched namespace, or all), so the controller needs no
    /// cluster-wide access to Secrets.
    pub secrets_namespaces: Vec<String>,
    /// When self-heal stops fighting another writer (default: more than 3
    /// reverts of one field in 5 minutes backs off for 1 minute, doubling).
    pub flap_policy: FlapPolicy,
    /// How sources are rendered: renderer sandbox, limits, programs.
    pub sandbox: tether_source::Sandbox,
    /// The longest a break-glass window may be granted at once (its
    /// opening, or each extension); a window beyond it is Invalid.
    pub max_window_ttl: Duration,
    /// How long an app may stay not Synced before `NotSyncedTooLong`, for
    /// apps whose `spec.syncPolicy.alertNotSyncedAfter` says nothing.
    pub alert_not_synced_after: Duration,
    /// `tether run --notify-webhook` URLs: every notification goes to
    /// each, as JSON (more routes in the `tether-notifications` ConfigMap).
    pub notify_webhooks: Vec<String>,
    /// Whom Applications' changes are made as (`tether run
    /// --default-service-account`, `--require-service-account`).
    pub identity_policy: tether_core::identity::IdentityPolicy,
    /// `tether run --shards N`: Applications are split into N shards, each
    /// held through its own Lease by one replica (see `crate::shards`);
    /// 0 is one leader for everything.
    pub shards: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            resync: Duration::from_secs(180),
            poll_interval: tether_core::poll::DEFAULT_INTERVAL,
            concurrency: 16,
            cache_dir: std::env::temp_dir().join("tether-cache"),
            lease_namespace: "default".into(),
            identity: format!("tether-{}", std::process::id()),
            pod: None,
            watch_namespace: None,
            secrets_namespaces: Vec::new(),
            flap_policy: FlapPolicy::default(),
            sandbox: tether_source::Sandbox::default(),
            max_window_ttl: tether_core::window::DEFAULT_MAX_TTL,
            alert_not_synced_after: tether_core::alert::DEFAULT_THRESHOLD,
            notify_webhooks: Vec::new(),
            identity_policy: Default::default(),
            shards: 0,
        }
    }
}

pub use crate::ready::Ready;

/// How this replica signs its events.
pub fn reporter(config: &Config) -> Reporter {
    Reporter {
        controller: "tether".into(),
        instance: Some(config.identity.clone()),
    }
}

/// Shared by all reconciles.
pub struct Context {
    /// The client of the cluster Tether runs in, where Applications,
    /// windows, Events and audit records live.
    pub client: Client,
    /// The clusters Applications deploy to: this one and registered ones,
    /// each with its own clients, watch caches and capabilities.
    pub clusters: Clusters,
    pub repositories: Arc<Repositories>,
    /// Health rules: shipped, the cluster's, and each Application's.
    pub health: Arc<HealthRules>,
    /// Events, aggregated (shared with the break-glass windows' loop).
    pub recorder: Arc<Recorder>,
    /// Notifications of what changed (set with [`Context::notifying`]).
    pub notifier: crate::notify::Notifier,
    /// Application status writes, immediate or deferred.
    pub status_writes: StatusWrites,
    /// Every break-glass window (watched), and the audit log of the
    /// changes made inside them.
    pub windows: Store<BreakGlass>,
    pub windows_ready: Ready,
    pub audit: AuditLog,
    /// The controller's audit key: seals the audit log, masks Secret values.
    pub audit_key: AuditKey,
    /// The watched repository-credential Secrets (see [`crate::credentials`]).
    pub secrets: crate::credentials::RepositorySecrets,
    pub secrets_ready: Ready,
    /// What the loop measures (`/metrics`).
    pub metrics: Arc<Metrics>,
    /// Every Project (watched; see `crate::reconcile::project`), once
    /// listed.
    pub projects: Store<Project>,
    pub projects_ready: Ready,
    /// Every Application (the controller's watch cache), for what one
    /// needs to know of others (`spec.dependsOn`); set with
    /// [`Context::knowing_apps`].
    pub apps: Store<crate::api::StoredApplication>,
    /// Checked before each wave of a sync while leading (set with
    /// [`Context::fenced_by`]); none outside leader election.
    pub fence: Option<crate::fence::Fence>,
    pub config: Config,
    memos: Mutex<HashMap<AppKey, Arc<Mutex<AppMemo>>>>,
}

impl Context {
    pub fn new(
        client: Client,
        clusters: Clusters,
        (windows, windows_ready): (Store<BreakGlass>, Ready),
        (secrets, secrets_ready): (crate::credentials::RepositorySecrets, Ready),
        audit_key: AuditKey,
        metrics: Arc<Metrics>,
        config: Config,
    ) -> Self {
        let reporter = reporter(&config);
        Context {
            repositories: Arc::new(
                Repositories::new(config.cache_dir.join("repositories"))
                    .with_sandbox(config.sandbox.clone()),
            ),
            recorder: Arc::new(Recorder::new(client.clone(), reporter)),
            status_writes: StatusWrites::new(client.clone()),
            notifier: crate::notify::Notifier::disabled(),
            client,
            clusters,
            health: Arc::default(),
            windows,
            windows_ready,
            audit: AuditLog::new(&config.lease_namespace, audit_key.clone()),
            audit_key,
            secrets,
            secrets_ready,
            // No Projects until `watching_projects`: every app is refused.
            projects: kube::runtime::reflector::store().0,
            projects_ready: Ready::never(),
            apps: kube::runtime::reflector::store().0,
            metrics,
            fence: None,
            config,
            memos: Mutex::default(),
        }
    }

    /// This context, sending notifications through `notifier`.
    pub fn notifying(self, notifier: crate::notify::Notifier) -> Self {
        Context { notifier, ..self }
    }

    /// This context, judging apps by the Projects in `projects` (watched).
    pub fn watching_projects(self, (projects, projects_ready): (Store<Project>, Ready)) -> Self {
        Context {
            projects,
            projects_ready,
            ..self
        }
    }

    /// This context, knowing the Applications in `apps` (watched).
    pub fn knowing_apps(self, apps: Store<crate::api::StoredApplication>) -> Self {
        Context { apps, ..self }
    }

    /// This context, fencing each sync wave with `fence`.
    pub fn fenced_by(self, fence: crate::fence::Fence) -> Self {
        Context {
            fence: Some(fence),
            ..self
        }
    }

    /// What this controller remembers about the Application with `uid`:
    /// forgotten when an app of the same name but another uid shows up.
    pub fn memo_of(&self, app: &AppKey, uid: Option<&str>) -> Arc<Mutex<AppMemo>> {
        let memo = self.memo(app);
        let mut remembered = memo.lock().expect("lock");
        if remembered.uid.as_deref() != uid {
            *remembered = AppMemo {
                flaps: FlapGuard::new(self.config.flap_policy),
                uid: uid.map(str::to_string),
                ..AppMemo::default()
            };
        }
        drop(remembered);
        memo
    }

    /// The watch cache now holds `app` as stored: once it holds the status
    /// this controller last wrote, the memo's copy of that status is
    /// dropped (the cache's is as new, and only newer ones follow), so a
    /// steady state keeps each status once, not twice.
    pub fn cache_saw(&self, app: &crate::api::StoredApplication) {
        let Ok(decoded) = &app.decoded else {
            return;
        };
        let key = (
            app.metadata.namespace.clone().unwrap_or_default(),
            app.metadata.name.clone().unwrap_or_default(),
        );
        let Some(memo) = self.memos.lock().expect("lock").get(&key).cloned() else {
            return;
        };
        let mut memo = memo.lock().expect("lock");
        if memo.uid == app.metadata.uid
            && !memo.status_held
            && memo
                .written_status
                .as_deref()
                .is_some_and(|written| decoded.status.as_ref() == Some(written))
        {
            memo.written_status = None;
        }
    }

    /// Remembers `status` as the one this controller last wrote for `app`,
    /// unless the watch cache holds it already; a status held for a sync's
    /// progress writes is let go. (Checked under the memo's
    /// lock, which [`Context::cache_saw`] takes after the cache is updated:
    /// whichever comes second drops the copy.)
    pub fn remember_written(&self, app: &AppKey, memo: &Mutex<AppMemo>, status: ApplicationStatus) {
        let mut memo = memo.lock().expect("lock");
        let cached = self
            .apps
            .get(&kube::runtime::reflector::ObjectRef::new(&app.1).within(&app.0))
            .is_some_and(|stored| {
                stored.metadata.uid == memo.uid
                    && stored
                        .decoded
                        .as_ref()
                        .is_ok_and(|decoded| decoded.status.as_ref() == Some(&status))
            });
        memo.written_status = (!cached).then(|| Box::new(status));
        memo.status_held = false;
    }

    /// What this controller remembers about one application.
    pub fn memo(&self, app: &AppKey) -> Arc<Mutex<AppMemo>> {
        self.memos
            .lock()
            .expect("lock")
            .entry(app.clone())
            .or_insert_with(|| {
                Arc::new(Mutex::new(AppMemo {
                    flaps: FlapGuard::new(self.config.flap_policy),
                    ..AppMemo::default()
                }))
            })
            .clone()
    }
}
