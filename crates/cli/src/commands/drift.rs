//! `tether drift`: which objects differ from Git, which fields, who changed
//! them, and what Tether did about it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use kube::api::Api;
use tether_controller::api::Application;
use tether_controller::drift::{rows, table};

/// Show drift: per object and field the desired and live values (Secret
/// values masked), the writer (field manager, operation, time), the kind
/// (Manual, Accidental, Emergency) and the response (Healed, Reported,
/// BackedOff); then orphans (objects no longer in Git) and their prune fate.
///
/// Exit code: 0 no unresolved drift or orphan, 1 some, 2 error.
/// Example: `tether drift shop` or `tether drift -o json`
#[derive(Debug, clap::Args)]
pub struct DriftArgs {
    /// One Application (default: all in the namespace).
    pub app: Option<String>,
    /// Namespace the Applications live in.
    #[arg(long, short = 'n', default_value = "tether-system")]
    pub namespace: String,
    /// Output format.
    #[arg(long, short = 'o', default_value = "table", value_parser = ["table", "json"])]
    pub output: String,
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, env = "TETHER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

pub async fn run(args: DriftArgs) -> anyhow::Result<ExitCode> {
    let client = tether_cluster::connect(args.kubeconfig.as_deref()).await?;
    let api: Api<Application> = Api::namespaced(client, &args.namespace);
    let apps = match &args.app {
        Some(name) => vec![
            api.get(name)
                .await
                .with_context(|| format!("Application {}/{name}", args.namespace))?,
        ],
        None => api.list(&Default::default()).await?.items,
    };
    let rows = rows(&apps);
    match args.output.as_str() {
        "json" => println!("{}", serde_json::to_string_pretty(&rows)?),
        _ => print!("{}", table(&rows)),
    }
    let unresolved = rows.iter().any(|row| row.resolved_at.is_none());
    Ok(if unresolved {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
