//! `tether app`: create, list, get and delete Applications.

mod create;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use kube::ResourceExt;
use kube::api::Api;
use tether_controller::api::Application;

use super::out::{outln, print_as};

/// Manage Applications (or `kubectl apply` an Application manifest).
#[derive(Debug, clap::Args)]
pub struct AppArgs {
    #[command(subcommand)]
    pub command: AppCommand,
    /// Namespace the Applications live in.
    #[arg(long, short = 'n', global = true, default_value = "tether-system")]
    pub namespace: String,
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, global = true, env = "TETHER_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Print Applications as yaml or json: `get` (default yaml), `list`
    /// (default: names), `create` (the Application created, or with
    /// --dry-run the one it would create; default yaml).
    #[arg(long, short = 'o', global = true, value_parser = ["yaml", "json"])]
    pub output: Option<String>,
}

#[derive(Debug, clap::Subcommand)]
pub enum AppCommand {
    /// Create or update an Application. Without --renderer, the renderer
    /// is detected from the files at --path at --revision.
    ///
    /// Examples:
    ///   tether app create shop --repo file:///srv/git/shop.git --path apps/shop --dest-namespace shop
    ///   tether app create web --repo https://git.example.com/web.git --path chart \
    ///       --helm-values values-prod.yaml --helm-set image.tag=1.4.2 --dest-namespace web \
    ///       --create-namespace --dry-run -o yaml
    ///   tether app create ingress --repo https://charts.example.com/stable --chart ingress-nginx \
    ///       --version 4.11.x --dest-namespace ingress
    Create(Box<create::CreateArgs>),
    /// List Applications (see also `tether status`).
    List,
    /// Print one Application as YAML.
    Get { name: String },
    /// Delete an Application. Its objects stay in the cluster (the output
    /// lists them) unless `--cascade`.
    Delete {
        name: String,
        /// Delete the objects the app owns too (those in its inventory
        /// that still carry its tracking label and annotation; adopted ones
        /// only with `pruneAdopted`): sets the `tether.dev/cascade`
        /// finalizer, and the controller deletes them before the app.
        #[arg(long)]
        cascade: bool,
    },
}

pub async fn run(args: AppArgs) -> anyhow::Result<ExitCode> {
    let output = args.output.as_deref();
    // A dry run of create needs no cluster: it is answered before connecting.
    let command = match args.command {
        AppCommand::Create(create) => {
            create::run(*create, &args.namespace, args.kubeconfig.as_deref(), output).await?;
            return Ok(ExitCode::SUCCESS);
        }
        other => other,
    };
    let client = tether_cluster::connect(args.kubeconfig.as_deref()).await?;
    let apps: Api<Application> = Api::namespaced(client, &args.namespace);
    match command {
        AppCommand::Create(_) => unreachable!("created above"),
        AppCommand::List => {
            let list = apps.list(&Default::default()).await?;
            match output {
                Some(format) => print_as(&list.items, format)?,
                None => {
                    for app in list {
                        outln!("{}", app.name_any());
                    }
                }
            }
        }
        AppCommand::Get { name } => {
            let app = apps
                .get(&name)
                .await
                .with_context(|| format!("Application {}/{name}", args.namespace))?;
            print_as(&app, output.unwrap_or("yaml"))?;
        }
        AppCommand::Delete { name, cascade } => {
            let what = format!("Application {}/{name}", args.namespace);
            outln!(
                "{}",
                super::app_delete::delete(&apps, &name, cascade)
                    .await
                    .context(what)?
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
