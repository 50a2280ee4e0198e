//! `tether dashboard`: the web overview of the Applications, as the user.

use std::net::SocketAddr;
use std::process::ExitCode;

use tether_dashboard::Dashboard;

use super::kubeconfig::Kubeconfig;
use super::out::outln;

/// Serve the web dashboard: the four operational states, the Sync × Health
/// matrix and a filterable, sortable table of Applications, updated live.
/// It talks to the cluster with your kubeconfig, so it shows what your
/// RBAC lets you list — and anyone who reaches its port acts as you.
///
/// Example: `tether dashboard -n shop` or `tether dashboard --address 127.0.0.1:9090`
#[derive(Debug, clap::Args)]
pub struct DashboardArgs {
    /// Address to listen on; only loopback unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub address: SocketAddr,
    /// Listen on a non-loopback address (anyone reaching it acts as you).
    #[arg(long)]
    pub allow_remote: bool,
    /// Watch the Applications of this namespace only.
    #[arg(long, short = 'n', conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Watch the Applications of all namespaces (the default).
    #[arg(long, short = 'A')]
    pub all_namespaces: bool,
    /// Open the dashboard in your browser once it is listening.
    #[arg(long)]
    pub open: bool,
    #[command(flatten)]
    pub kubeconfig: Kubeconfig,
}

pub async fn run(args: DashboardArgs) -> anyhow::Result<ExitCode> {
    // Refused before anything else: no credentials are read for it.
    let listen = tether_dashboard::checked(args.address, args.allow_remote)?;
    let client = args.kubeconfig.connect().await?;
    let dashboard = Dashboard::start(client, args.namespace.as_deref(), listen).await?;
    outln!(
        "Dashboard on {} (acting as your kubeconfig's user)",
        dashboard.url()
    );
    if args.open {
        open_browser(&dashboard.url());
    }
    dashboard.serve().await?;
    Ok(ExitCode::SUCCESS)
}

/// Asks the desktop to open `url` in the user's browser (`xdg-open`, or
/// `open` on macOS). A failure is said, and the dashboard keeps serving.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let opened = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(error) = opened {
        eprintln!("--open: could not start {opener} ({error}); open {url} yourself");
    }
}
