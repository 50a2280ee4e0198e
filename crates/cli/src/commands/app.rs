//! `tether app`: create, list, get and delete Applications.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use tether_controller::api::Application;
use tether_core::Action;
use tether_core::tracking::FIELD_MANAGER;

use super::out::outln;

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
}

#[derive(Debug, clap::Subcommand)]
pub enum AppCommand {
    /// Create or update an Application.
    ///
    /// Example: `tether app create shop --repo file:///srv/git/shop.git --path apps/shop --dest-namespace shop`
    Create(CreateArgs),
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

#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    pub name: String,
    /// Git repository URL.
    #[arg(long)]
    pub repo: String,
    /// Branch, tag, semver range or commit (default: the remote's HEAD).
    #[arg(long, default_value = "")]
    pub revision: String,
    /// Directory inside the repository.
    #[arg(long, default_value = "")]
    pub path: String,
    /// Namespace for objects that do not name one.
    #[arg(long)]
    pub dest_namespace: String,
    /// Report drift but do not revert it.
    #[arg(long)]
    pub no_self_heal: bool,
    /// Delete objects removed from Git.
    #[arg(long)]
    pub prune: bool,
    /// The Secret (in the Application's namespace, labelled
    /// `tether.dev/secret-type=repository`) with the repository's credentials.
    #[arg(long)]
    pub secret: Option<String>,
}

pub async fn run(args: AppArgs) -> anyhow::Result<ExitCode> {
    let client = tether_cluster::connect(args.kubeconfig.as_deref()).await?;
    let apps: Api<Application> = Api::namespaced(client, &args.namespace);
    match args.command {
        AppCommand::Create(create) => {
            let mut source =
                json!({"repoURL": create.repo, "revision": create.revision, "path": create.path});
            if let Some(secret) = &create.secret {
                source["secretRef"] = json!({"name": secret});
            }
            let manifest = json!({
                "apiVersion": Application::api_version(&()),
                "kind": Application::kind(&()),
                "metadata": {"name": create.name, "namespace": args.namespace},
                "spec": {
                    "source": source,
                    "destination": {"namespace": create.dest_namespace},
                    "syncPolicy": {"selfHeal": !create.no_self_heal, "prune": create.prune},
                }
            });
            let what = || format!("Application {}/{}", args.namespace, create.name);
            let before = apps.get_opt(&create.name).await.with_context(what)?;
            let after = apps
                .patch(
                    &create.name,
                    &PatchParams::apply(FIELD_MANAGER),
                    &Patch::Apply(&manifest),
                )
                .await
                .with_context(what)?;
            let version = |app: &Application| app.resource_version().unwrap_or_default();
            let action =
                Action::of_apply(before.as_ref().map(version).as_deref(), &version(&after));
            outln!("{} {action}", what());
        }
        AppCommand::List => {
            for app in apps.list(&Default::default()).await? {
                outln!("{}", app.name_any());
            }
        }
        AppCommand::Get { name } => {
            let app = apps
                .get(&name)
                .await
                .with_context(|| format!("Application {}/{name}", args.namespace))?;
            outln!("{}", serde_json::to_string_pretty(&app)?);
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
