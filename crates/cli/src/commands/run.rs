//! `tether run`: the controller.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tether_controller::metrics::Metrics;
use tether_controller::serve::access::Access;
use tether_controller::serve::http;
use tether_controller::{Config, Probe, Trigger, Wiring};
use tether_source::render::SandboxMode;

use super::kubeconfig::Kubeconfig;

/// Run the controller against the current kubeconfig: reconcile every
/// Application continuously (Git changes, Application changes and changes
/// to managed objects wake it; a periodic resync is the safety net). Only
/// one replica acts at a time (leader election on a Lease).
///
/// With `--http-addr` it serves `/healthz` and `/readyz` (503 while the
/// controller cannot list its Applications), `/metrics` (Prometheus; to a
/// bearer token allowed `get` on the non-resource URL `/metrics`, as the
/// ClusterRole `tether-metrics-reader` grants) and, given a webhook secret,
/// `POST /webhook/{github|gitlab|gitea|forgejo}`: a verified push wakes
/// every Application of the pushed repository at once. Without a webhook,
/// each repository is polled (`--poll-interval`, or an app's
/// `spec.source.interval`) and a moved revision wakes its apps.
///
/// Example: `tether run --lease-namespace tether-system --http-addr 127.0.0.1:8080
/// --webhook-secret-file /etc/tether/webhook-secret`
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Namespace of the leader-election Lease.
    #[arg(long, default_value = "tether-system")]
    pub lease_namespace: String,
    /// Seconds between safety-net resyncs of each application.
    #[arg(long, default_value_t = 180)]
    pub resync_seconds: u64,
    /// How often each repository is asked whether an app's revision moved
    /// (a `git ls-remote`, shared by the apps of one repository), for apps
    /// whose `spec.source.interval` says nothing: 30s, 3m, 1h.
    #[arg(long, default_value = "3m")]
    pub poll_interval: String,
    /// Applications reconciled concurrently.
    #[arg(long, default_value_t = 16)]
    pub concurrency: u16,
    /// Where Git object stores and caches are kept.
    #[arg(long, env = "TETHER_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// This replica's name in the Lease (default: its pod's name, else
    /// tether-<pid>).
    #[arg(long)]
    pub identity: Option<String>,
    /// Split Applications into this many shards (by a consistent hash of
    /// namespace/name), each reconciled by the replica holding its Lease
    /// `tether-shard-<i>`; replicas share the shards evenly and take over
    /// a stopped one's within the Lease's 15 s. 0: one leader for all.
    #[arg(long, default_value_t = 0)]
    pub shards: u32,
    /// The pod this replica runs in (set from the downward API by `tether
    /// install`): labelled `tether.dev/leader=true` while it leads, so the
    /// Service sends webhooks to the leader.
    #[arg(long, env = "POD_NAME", requires = "pod_namespace")]
    pub pod_name: Option<String>,
    /// The namespace of `--pod-name`.
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: Option<String>,
    /// Reconcile only the Applications in this namespace (default: all).
    #[arg(long)]
    pub watch_namespace: Option<String>,
    /// Read repository-credential Secrets only in this namespace
    /// (repeatable; default: the watched namespace, or all), so the
    /// controller needs no cluster-wide access to Secrets (`tether install
    /// --secrets-namespace` grants each).
    #[arg(long = "secrets-namespace", value_name = "NS")]
    pub secrets_namespaces: Vec<String>,
    /// The longest a break-glass window may be granted at once (its
    /// opening or an extension): 90m, 12h, 1d. Windows beyond it are
    /// Invalid and suspend nothing.
    #[arg(long, default_value = "24h")]
    pub max_break_glass_ttl: String,
    /// How long an Application may stay not Synced before it gets the
    /// condition `NotSyncedTooLong` (with an Event, a notification and the
    /// metric `tether_app_not_synced_too_long`), for apps whose
    /// `spec.syncPolicy.alertNotSyncedAfter` says nothing: 90s, 15m, 1h.
    #[arg(long, default_value = "1h")]
    pub alert_not_synced_after: String,
    /// Send every notification (state changed, NotSyncedTooLong raised or
    /// cleared, drift left in place, self-heal fighting, break-glass, sync
    /// failed) to this URL as JSON (repeatable). More routes, with event
    /// filters, app selectors, Slack format and signing: the ConfigMap
    /// `tether-notifications` in the lease namespace.
    #[arg(long = "notify-webhook", value_name = "URL")]
    pub notify_webhooks: Vec<String>,
    /// Make the changes of Applications that name no
    /// `spec.serviceAccountName` as this ServiceAccount of their own
    /// namespace (Kubernetes impersonation), so RBAC decides what they may
    /// change.
    #[arg(long, value_name = "NAME")]
    pub default_service_account: Option<String>,
    /// Refuse Applications that name no ServiceAccount (when there is no
    /// --default-service-account): nothing is applied with the
    /// controller's own rights.
    #[arg(long)]
    pub require_service_account: bool,
    #[command(flatten)]
    pub kubeconfig: Kubeconfig,
    /// Serve HTTP (health, metrics, webhooks) on this address, e.g. 127.0.0.1:8080.
    #[arg(long)]
    pub http_addr: Option<SocketAddr>,
    /// File holding the shared webhook secret (GitHub/Gitea HMAC key,
    /// GitLab token); without it, or while the file does not exist, no
    /// webhook is accepted.
    #[arg(long, env = "TETHER_WEBHOOK_SECRET_FILE")]
    pub webhook_secret_file: Option<PathBuf>,
    /// Run renderers (helm, kustomize, Jsonnet) in a bubblewrap sandbox:
    /// required (refuse to render without bwrap) | off.
    #[arg(
        long,
        env = "TETHER_RENDER_SANDBOX",
        default_value = "required",
        value_parser = super::word::<SandboxMode>()
    )]
    pub render_sandbox: SandboxMode,
}

/// Completes on SIGTERM (a pod being deleted) or SIGINT (Ctrl-C).
async fn stop() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    tracing::info!("tether controller stopping");
}

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let (kubeconfig, http_addr) = (args.kubeconfig.clone(), args.http_addr);
    let secret_file = args.webhook_secret_file.clone();
    let config = config(args)?;
    let secret = webhook_secret(secret_file.as_deref())?;
    if let Err(error) = tether_source::render::probe_sandbox(&config.sandbox) {
        // Plain directories still render; Helm, Kustomize and Jsonnet
        // sources will fail with this same message in their status.
        tracing::warn!(%error, "renderer sandbox unavailable");
    }
    // Every request the controller makes is counted (`/metrics`).
    let metrics = Arc::new(Metrics::new());
    let counted = metrics.clone();
    let connection = kubeconfig
        .connection(Arc::new(move |verb: &str, resource: &str, code: &str| {
            counted.kube_request(verb, resource, code)
        }))
        .await?;
    let client = connection.client()?;
    let server = client
        .apiserver_version()
        .await
        .map(|info| info.git_version)
        .unwrap_or_else(|error| format!("unknown ({})", tether_cluster::error::describe(&error)));
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        identity = %config.identity,
        lease_namespace = %config.lease_namespace,
        watching = config.watch_namespace.as_deref().unwrap_or("all namespaces"),
        http = %http_addr.map_or("off".to_string(), |addr| addr.to_string()),
        webhooks = secret.is_some(),
        resync = ?config.resync,
        concurrency = config.concurrency,
        cache_dir = %config.cache_dir.display(),
        kubernetes = %server,
        "tether controller starting"
    );
    // The dashboard at /ui: its own watch of the Applications while
    // someone uses it, each request acting with the bearer token it
    // carries.
    let ui_connection = connection.clone();
    let ui_namespace = config.watch_namespace.clone();
    let wiring = Wiring {
        trigger: Trigger::default(),
        probe: Probe::default(),
        metrics,
        connection: Some(connection),
    };
    let serve_http = async {
        match http_addr {
            Some(addr) => {
                let access = Access::new(client.clone(), "/metrics");
                let ui = tether_dashboard::in_controller(ui_connection, ui_namespace.as_deref())
                    .await
                    .context("starting the dashboard at /ui")?;
                let router = http::app(wiring.trigger.clone(), wiring.probe.clone(), secret)
                    .merge(http::metrics(wiring.metrics.clone(), access))
                    .nest_service("/ui", ui);
                http::serve(addr, router)
                    .await
                    .with_context(|| format!("serving HTTP on {addr}"))
            }
            None => std::future::pending().await,
        }
    };
    let controller = tether_controller::run_until(client.clone(), config, wiring.clone(), stop());
    tokio::select! {
        result = controller => result?,
        result = serve_http => result?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The controller's configuration from `tether run`'s arguments.
fn config(args: RunArgs) -> anyhow::Result<Config> {
    let defaults = Config::default();
    Ok(Config {
        resync: Duration::from_secs(args.resync_seconds),
        poll_interval: tether_core::poll::parse_interval(&args.poll_interval)?,
        concurrency: args.concurrency,
        cache_dir: args.cache_dir.unwrap_or(defaults.cache_dir),
        lease_namespace: args.lease_namespace,
        identity: args
            .identity
            .or_else(|| args.pod_name.clone())
            .unwrap_or(defaults.identity),
        pod: args
            .pod_name
            .zip(args.pod_namespace)
            .map(|(name, namespace)| tether_controller::context::ReplicaPod { namespace, name }),
        watch_namespace: args.watch_namespace,
        secrets_namespaces: args.secrets_namespaces,
        flap_policy: defaults.flap_policy,
        sandbox: super::render::sandbox(args.render_sandbox),
        max_window_ttl: tether_core::window::parse_ttl(&args.max_break_glass_ttl)?,
        alert_not_synced_after: tether_core::window::parse_ttl(&args.alert_not_synced_after)
            .context("--alert-not-synced-after")?,
        notify_webhooks: webhook_urls(args.notify_webhooks)?,
        identity_policy: tether_core::identity::IdentityPolicy {
            default_service_account: args.default_service_account,
            require_service_account: args.require_service_account,
        },
        shards: args.shards,
    })
}

/// The shared secret push webhooks are signed with, from `path`; none
/// when no path is given or the file is absent.
fn webhook_secret(path: Option<&std::path::Path>) -> anyhow::Result<Option<Vec<u8>>> {
    Ok(match path {
        // The in-cluster Deployment mounts the Secret `tether-webhook` as
        // optional: without it there are no webhooks (polling goes on).
        Some(path) if !path.exists() => {
            tracing::warn!(
                path = %path.display(),
                "no webhook secret; webhooks are off (create the Secret tether-webhook with key `secret`, then restart)"
            );
            None
        }
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the webhook secret {}", path.display()))?
                .trim()
                .as_bytes()
                .to_vec(),
        ),
        None => None,
    })
}

/// The `--notify-webhook` values, refused at start when one is not an
/// http(s) URL. Not a clap value parser: clap's error would repeat the
/// value, and a URL may carry a token.
fn webhook_urls(urls: Vec<String>) -> anyhow::Result<Vec<String>> {
    for (index, url) in urls.iter().enumerate() {
        tether_controller::notify::route::http_url(url)
            .map_err(|error| anyhow::anyhow!("--notify-webhook #{}: {error}", index + 1))?;
    }
    Ok(urls)
}
