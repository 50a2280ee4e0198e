//! `tether cluster`: register the clusters Applications deploy to
//! (`spec.destination.cluster`), list them, remove them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams};
use tether_cluster::remote::{
    self, CA_KEY, CLUSTER_LABEL, NAME_KEY, SERVER_KEY, SecretData, TOKEN_KEY,
};
use tether_controller::api::Application;
use tether_controller::clusters::registration::{self, Registration};

use super::columns::aligned;
use super::out::outln;

/// Register clusters for Applications to deploy to, as `argocd cluster
/// add` does: a ServiceAccount is made on the cluster, its token and the
/// cluster's CA are kept in a Secret labelled `tether.dev/cluster: "true"`
/// in the controller's namespace, and an Application names the cluster in
/// `spec.destination.cluster`.
///
/// Examples:
///   tether cluster add prod --kubeconfig prod.kubeconfig --context prod-admin
///   tether cluster add edge --kubeconfig edge.kubeconfig --enforce-single-writer
///   tether cluster list
///   tether cluster remove edge
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    pub command: ClusterCommand,
    /// The controller's namespace (where cluster Secrets live).
    #[arg(long, short = 'n', global = true, default_value = "tether-system")]
    pub namespace: String,
}

#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// Register a cluster: make a ServiceAccount there bound to
    /// `--cluster-role`, and keep its token in a Secret beside the
    /// controller.
    Add(AddArgs),
    /// The registered clusters: server, whether they answer, their
    /// version and how many Applications deploy to each.
    List {
        /// The cluster Tether runs in (default: $TETHER_KUBECONFIG,
        /// $KUBECONFIG or ~/.kube/config).
        #[arg(long, env = "TETHER_KUBECONFIG")]
        kubeconfig: Option<PathBuf>,
    },
    /// Forget a cluster (its Secret). Refused while Applications deploy
    /// to it, unless --force; the ServiceAccount on the cluster stays.
    Remove {
        name: String,
        #[arg(long)]
        force: bool,
        /// The cluster Tether runs in.
        #[arg(long, env = "TETHER_KUBECONFIG")]
        kubeconfig: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The name Applications use in `spec.destination.cluster`.
    pub name: String,
    /// Kubeconfig of the cluster to register (as its administrator).
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Context in that kubeconfig (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
    /// The cluster Tether runs in (default: $TETHER_KUBECONFIG,
    /// $KUBECONFIG or ~/.kube/config).
    #[arg(long, env = "TETHER_KUBECONFIG")]
    pub control_kubeconfig: Option<PathBuf>,
    /// Namespace of the ServiceAccount made on the cluster.
    #[arg(long, default_value = "kube-system")]
    pub service_account_namespace: String,
    /// The ClusterRole the ServiceAccount is bound to there.
    #[arg(long, default_value = "cluster-admin")]
    pub cluster_role: String,
    /// Also install the single-writer admission policy there (only
    /// Tether, Kubernetes itself and the break-glass group change
    /// Tether's objects).
    #[arg(long)]
    pub enforce_single_writer: bool,
}

pub async fn run(args: ClusterArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ClusterCommand::Add(add) => self::add(add, &args.namespace).await,
        ClusterCommand::List { kubeconfig } => list(kubeconfig, &args.namespace).await,
        ClusterCommand::Remove {
            name,
            force,
            kubeconfig,
        } => remove(&name, force, kubeconfig, &args.namespace).await,
    }
}

async fn add(args: AddArgs, namespace: &str) -> anyhow::Result<ExitCode> {
    let target = target_config(&args).await?;
    let server = target.cluster_url.to_string();
    let ca = target.root_cert.clone().unwrap_or_default();
    let client = kube::Client::try_from(target)
        .with_context(|| format!("cluster {}: connecting to {server}", args.name))?;
    let registration = Registration {
        namespace: args.service_account_namespace.clone(),
        cluster_role: args.cluster_role.clone(),
    };
    let token = registration::make_service_account(&client, &registration)
        .await
        .with_context(|| format!("cluster {}", args.name))?;
    outln!(
        "cluster {}: ServiceAccount {}/{} bound to ClusterRole {}",
        args.name,
        registration.namespace,
        registration::SERVICE_ACCOUNT,
        registration.cluster_role
    );
    if args.enforce_single_writer {
        let rule = tether_controller::single_writer::SingleWriter::new(namespace)
            .with_writer(registration.user());
        for (object, action) in tether_controller::single_writer::enforce(client, &rule).await? {
            outln!("cluster {}: {object} {action}", args.name);
        }
    }
    let mut data = SecretData::new();
    data.insert(NAME_KEY.into(), args.name.clone().into_bytes());
    data.insert(
        SERVER_KEY.into(),
        server.trim_end_matches('/').as_bytes().to_vec(),
    );
    data.insert(TOKEN_KEY.into(), token.into_bytes());
    if !ca.is_empty() {
        data.insert(CA_KEY.into(), remote::pem(&ca).into_bytes());
    }
    // The Secret must work before it is written: ask the cluster as the new account.
    let secret_name = format!("cluster-{}", args.name);
    let config = remote::config_of(&format!("{namespace}/{secret_name}"), &data).await?;
    let version = kube::Client::try_from(config)?
        .apiserver_version()
        .await
        .with_context(|| {
            format!(
                "cluster {}: the new ServiceAccount's token was refused at {server}",
                args.name
            )
        })?;
    let control = tether_cluster::connect(args.control_kubeconfig.as_deref()).await?;
    let secrets: Api<Secret> = Api::namespaced(control, namespace);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(secret_name.clone()),
            labels: Some(BTreeMap::from([(CLUSTER_LABEL.into(), "true".into())])),
            ..ObjectMeta::default()
        },
        data: Some(
            data.into_iter()
                .map(|(key, value)| (key, ByteString(value)))
                .collect(),
        ),
        type_: Some("Opaque".into()),
        ..Secret::default()
    };
    secrets
        .patch(
            &secret_name,
            &PatchParams::apply("tether-cli").force(),
            &Patch::Apply(&secret),
        )
        .await
        .with_context(|| format!("writing Secret {namespace}/{secret_name}"))?;
    outln!(
        "cluster {} added: {server} (Kubernetes {}), Secret {namespace}/{secret_name}",
        args.name,
        version.git_version
    );
    Ok(ExitCode::SUCCESS)
}

async fn target_config(args: &AddArgs) -> anyhow::Result<kube::Config> {
    let file = kube::config::Kubeconfig::read_from(&args.kubeconfig)
        .with_context(|| format!("kubeconfig {}", args.kubeconfig.display()))?;
    let options = kube::config::KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    kube::Config::from_custom_kubeconfig(file, &options)
        .await
        .with_context(|| format!("kubeconfig {}", args.kubeconfig.display()))
}

/// How long `list` waits for each cluster.
const LIST_TIMEOUT: Duration = Duration::from_secs(3);

async fn list(kubeconfig: Option<PathBuf>, namespace: &str) -> anyhow::Result<ExitCode> {
    let control = tether_cluster::connect(kubeconfig.as_deref()).await?;
    let secrets: Api<Secret> = Api::namespaced(control.clone(), namespace);
    let registered = secrets
        .list(&ListParams::default().labels(&format!("{CLUSTER_LABEL}=true")))
        .await
        .with_context(|| format!("listing cluster Secrets in namespace {namespace}"))?;
    let apps: Api<Application> = Api::all(control);
    let apps = apps.list(&ListParams::default()).await?;
    let mut lines = vec![vec![
        "NAME".into(),
        "SERVER".into(),
        "VERSION".into(),
        "REACHABLE".into(),
        "APPS".into(),
    ]];
    for secret in registered.items {
        let secret_name = secret.metadata.name.clone().unwrap_or_default();
        let data = remote::secret_data(&secret);
        let name = remote::registered_name(&secret);
        let count = apps
            .items
            .iter()
            .filter(|app| app.spec.destination.cluster.as_deref() == Some(name.as_str()))
            .count();
        let (server, version, reachable) =
            match remote::config_of(&format!("{namespace}/{secret_name}"), &data).await {
                Err(error) => ("-".into(), "-".into(), format!("no: {error}")),
                Ok(config) => {
                    let server = config.cluster_url.to_string();
                    let asked = async { kube::Client::try_from(config)?.apiserver_version().await };
                    match tokio::time::timeout(LIST_TIMEOUT, asked).await {
                        Ok(Ok(version)) => (server, version.git_version, "yes".into()),
                        Ok(Err(error)) => (
                            server,
                            "-".into(),
                            format!("no: {}", tether_cluster::error::describe(&error)),
                        ),
                        Err(_) => (
                            server,
                            "-".into(),
                            format!("no: no answer within {} s", LIST_TIMEOUT.as_secs()),
                        ),
                    }
                }
            };
        lines.push(vec![name, server, version, reachable, count.to_string()]);
    }
    outln!("{}", aligned(&lines).trim_end());
    Ok(ExitCode::SUCCESS)
}

async fn remove(
    name: &str,
    force: bool,
    kubeconfig: Option<PathBuf>,
    namespace: &str,
) -> anyhow::Result<ExitCode> {
    let control = tether_cluster::connect(kubeconfig.as_deref()).await?;
    let apps: Api<Application> = Api::all(control.clone());
    let users: Vec<String> = apps
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|app| app.spec.destination.cluster.as_deref() == Some(name))
        .map(|app| {
            format!(
                "{}/{}",
                app.metadata.namespace.as_deref().unwrap_or_default(),
                app.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect();
    if !users.is_empty() && !force {
        bail!(
            "cluster {name}: {} Applications deploy to it ({}); move or delete them first, or --force",
            users.len(),
            users.join(", ")
        );
    }
    let secrets: Api<Secret> = Api::namespaced(control, namespace);
    let registered = secrets
        .list(&ListParams::default().labels(&format!("{CLUSTER_LABEL}=true")))
        .await?;
    let mut removed = 0;
    for secret in registered.items {
        let secret_name = secret.metadata.name.clone().unwrap_or_default();
        if remote::registered_name(&secret) == name {
            secrets
                .delete(&secret_name, &DeleteParams::default())
                .await?;
            outln!("cluster {name} removed (Secret {namespace}/{secret_name})");
            removed += 1;
        }
    }
    if removed == 0 {
        bail!("cluster {name} is not registered in namespace {namespace}");
    }
    Ok(ExitCode::SUCCESS)
}
