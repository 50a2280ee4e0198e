//! `tether install`: the CRDs and the controller's identity and RBAC, and
//! optionally the controller itself (Deployment, Service, PodDisruptionBudget)
//! and the single-writer admission policy.

use std::process::ExitCode;

use super::kubeconfig::Kubeconfig;
use super::out::{outln, print_as};

/// Install Tether's CRDs (Application, BreakGlass), its namespace, service
/// account and least-privilege RBAC into the cluster, with server-side
/// apply, and the
/// admission policies `tether-break-glass` (a window's authors are the API
/// server's word; no grant longer than `--max-break-glass-ttl`) and
/// `tether-audit-records` (audit records only in the controller's
/// namespace, by the controller, never changed). Safe to run again.
///
/// With `--enforce-single-writer`, also a ValidatingAdmissionPolicy the
/// API server evaluates: changes and deletions of objects carrying Tether's
/// tracking label are rejected unless they come from Tether's service
/// account, a `--writer`, Kubernetes' own components, or a member of the
/// break-glass group. Remove it with
/// `kubectl delete validatingadmissionpolicybinding,validatingadmissionpolicy tether-single-writer`.
///
/// The controller may observe most kinds but applies only those the
/// aggregated ClusterRole `tether-applier` grants (see the README, "What
/// the controller may do"); it reads Secrets only in its namespace and
/// each `--secrets-namespace`.
///
/// Example: `tether install --namespace tether-system`
///
/// Example: `tether install --image registry.example.com/tether:0.1 --dry-run -o yaml > tether.yaml`
///
/// Example: `tether install --enforce-single-writer --writer kube-local-admin`
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// Namespace for the controller's service account.
    #[arg(long, short = 'n', default_value = "tether-system")]
    pub namespace: String,
    /// Also run the controller in the cluster: a Deployment of this image
    /// (non-root, read-only root filesystem, probes), a Service to the
    /// leading replica (webhooks) and a PodDisruptionBudget.
    #[arg(long, alias = "deployment-image")]
    pub image: Option<String>,
    /// How many controller replicas the Deployment runs (one leads).
    #[arg(long, default_value_t = 2, requires = "image")]
    pub replicas: u32,
    /// A namespace whose Secrets (repository credentials) the controller
    /// may read, besides its own (repeatable).
    #[arg(long = "secrets-namespace", value_name = "NS")]
    pub secrets_namespaces: Vec<String>,
    /// A namespace whose Applications apply as the ServiceAccount they
    /// name (`spec.serviceAccountName`): the controller may impersonate
    /// the ServiceAccounts there, and only there (repeatable).
    #[arg(long = "tenant-namespace", value_name = "NS")]
    pub tenant_namespaces: Vec<String>,
    /// The in-cluster controller applies the Applications that name no
    /// ServiceAccount as this one of their namespace
    /// (`tether run --default-service-account`).
    #[arg(long, value_name = "NAME", requires = "image")]
    pub default_service_account: Option<String>,
    /// The in-cluster controller refuses Applications without a
    /// ServiceAccount (`tether run --require-service-account`): nothing is
    /// applied with its own rights.
    #[arg(long, requires = "image")]
    pub require_service_account: bool,
    /// Install only the CRDs.
    #[arg(long, conflicts_with_all = ["image", "enforce_single_writer", "secrets_namespaces", "tenant_namespaces"])]
    pub crds_only: bool,
    /// Install the admission policy that makes Tether the only writer of
    /// the objects it manages.
    #[arg(long)]
    pub enforce_single_writer: bool,
    /// Group whose members may still change managed objects (incidents).
    #[arg(long, default_value = tether_controller::install::BREAK_GLASS_GROUP, requires = "enforce_single_writer")]
    pub break_glass_group: String,
    /// Another user allowed to write, e.g. the identity `tether run` uses
    /// outside the cluster (repeatable).
    #[arg(
        long = "writer",
        value_name = "USER",
        requires = "enforce_single_writer"
    )]
    pub writers: Vec<String>,
    /// Enforce only in this namespace (repeatable; default: everywhere).
    #[arg(
        long = "enforce-namespace",
        value_name = "NS",
        requires = "enforce_single_writer"
    )]
    pub enforce_namespaces: Vec<String>,
    /// The longest a break-glass window may be granted at once, refused by
    /// the admission policy beyond it (as `tether run --max-break-glass-ttl`).
    #[arg(long, default_value = "24h")]
    pub max_break_glass_ttl: String,
    /// Print the manifests instead of applying them (to commit them to Git).
    #[arg(long)]
    pub dry_run: bool,
    /// The format of `--dry-run`: YAML documents, or a JSON `List`.
    #[arg(long, short = 'o', default_value = "yaml", value_parser = ["yaml", "json"], requires = "dry_run")]
    pub output: String,
    /// `--dry-run -o json`, kept for scripts written before `--dry-run`.
    #[arg(long, hide = true, conflicts_with = "dry_run")]
    pub print: bool,
    #[command(flatten)]
    pub kubeconfig: Kubeconfig,
}

pub async fn run(args: InstallArgs) -> anyhow::Result<ExitCode> {
    let mut install = tether_controller::install::Install::new(&args.namespace);
    install.max_window_ttl = tether_core::window::parse_ttl(&args.max_break_glass_ttl)?;
    install.secrets_namespaces = args.secrets_namespaces.clone();
    install.tenant_namespaces = args.tenant_namespaces.clone();
    install.default_service_account = args.default_service_account.clone();
    install.require_service_account = args.require_service_account;
    install.image = args.image.clone();
    install.replicas = args.replicas;
    install.crds_only = args.crds_only;
    let single_writer = args.enforce_single_writer.then(|| {
        let mut rule = tether_controller::single_writer::SingleWriter::new(&args.namespace);
        rule.writers.extend(args.writers.iter().cloned());
        rule.break_glass_group = args.break_glass_group.clone();
        rule.namespaces = args.enforce_namespaces.clone();
        rule
    });
    if args.dry_run || args.print {
        let policy = single_writer.iter().flat_map(|rule| rule.manifests());
        let manifests: Vec<_> = install.manifests().into_iter().chain(policy).collect();
        let format = if args.print {
            "json"
        } else {
            args.output.as_str()
        };
        print_manifests(&manifests, format)?;
        return Ok(ExitCode::SUCCESS);
    }
    let client = args.kubeconfig.connect().await?;
    for (object, action) in tether_controller::install::apply(client.clone(), &install).await? {
        outln!("{object} {action}");
    }
    if let Some(rule) = single_writer {
        for (object, action) in tether_controller::single_writer::enforce(client, &rule).await? {
            outln!("{object} {action}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `manifests` as YAML documents, or as one JSON `List`: either applies
/// with `kubectl apply -f -`.
fn print_manifests(manifests: &[serde_json::Value], format: &str) -> anyhow::Result<()> {
    if format == "json" {
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": manifests});
        return print_as(&list, "json");
    }
    for manifest in manifests {
        outln!("---");
        print_as(manifest, "yaml")?;
    }
    Ok(())
}
