//! `tether run`: the controller.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tether_controller::Config;

/// Run the controller against the current kubeconfig: reconcile every
/// Application continuously (Git changes, Application changes and changes
/// to managed objects wake it; a periodic resync is the safety net). Only
/// one replica acts at a time (leader election on a Lease).
///
/// Example: `tether run --lease-namespace tether-system`
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Namespace of the leader-election Lease.
    #[arg(long, default_value = "tether-system")]
    pub lease_namespace: String,
    /// Seconds between safety-net resyncs of each application.
    #[arg(long, default_value_t = 180)]
    pub resync_seconds: u64,
    /// Applications reconciled concurrently.
    #[arg(long, default_value_t = 16)]
    pub concurrency: u16,
    /// Where Git object stores and caches are kept.
    #[arg(long, env = "TETHER_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,
    /// This replica's name in the Lease (default: tether-<pid>).
    #[arg(long)]
    pub identity: Option<String>,
    /// Reconcile only the Applications in this namespace (default: all).
    #[arg(long)]
    pub watch_namespace: Option<String>,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config or in-cluster).
    #[arg(long, env = "TETHER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let defaults = Config::default();
    let config = Config {
        resync: Duration::from_secs(args.resync_seconds),
        concurrency: args.concurrency,
        cache_dir: args.cache_dir.unwrap_or(defaults.cache_dir),
        lease_namespace: args.lease_namespace,
        identity: args.identity.unwrap_or(defaults.identity),
        watch_namespace: args.watch_namespace,
        flap_policy: defaults.flap_policy,
    };
    let client = tether_cluster::connect(args.kubeconfig.as_deref()).await?;
    tokio::select! {
        result = tether_controller::run(client, config) => result?,
        _ = tokio::signal::ctrl_c() => eprintln!("tether: stopping"),
    }
    Ok(ExitCode::SUCCESS)
}
