//! `tether install`: the CRDs and the controller's identity and RBAC, and
//! optionally the single-writer admission policy.

use std::process::ExitCode;

use super::kubeconfig::Kubeconfig;
use super::out::outln;

/// Install Tether's CRDs (Application, BreakGlass), its namespace, service
/// account and RBAC into the cluster, with server-side apply, and the
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
/// Example: `tether install --namespace tether-system`
///
/// Example: `tether install --enforce-single-writer --writer kube-local-admin`
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// Namespace for the controller's service account.
    #[arg(long, short = 'n', default_value = "tether-system")]
    pub namespace: String,
    /// Also run the controller in the cluster: a Deployment of this image.
    #[arg(long)]
    pub deployment_image: Option<String>,
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
    /// Print the manifests as JSON instead of applying them.
    #[arg(long)]
    pub print: bool,
    #[command(flatten)]
    pub kubeconfig: Kubeconfig,
}

pub async fn run(args: InstallArgs) -> anyhow::Result<ExitCode> {
    let cap = tether_core::window::parse_ttl(&args.max_break_glass_ttl)?;
    let deployment = args
        .deployment_image
        .as_deref()
        .map(|image| tether_controller::install::deployment(&args.namespace, image));
    let single_writer = args.enforce_single_writer.then(|| {
        let mut rule = tether_controller::single_writer::SingleWriter::new(&args.namespace);
        rule.writers.extend(args.writers.iter().cloned());
        rule.break_glass_group = args.break_glass_group.clone();
        rule.namespaces = args.enforce_namespaces.clone();
        rule
    });
    if args.print {
        let manifests = tether_controller::install::manifests_with_cap(&args.namespace, cap);
        let policy = single_writer.iter().flat_map(|rule| rule.manifests());
        for manifest in manifests
            .iter()
            .cloned()
            .chain(deployment.clone())
            .chain(policy)
        {
            outln!("{}", serde_json::to_string_pretty(&manifest)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let client = args.kubeconfig.connect().await?;
    for (object, action) in
        tether_controller::install::install_with_cap(client.clone(), &args.namespace, cap).await?
    {
        outln!("{object} {action}");
    }
    if let Some(deployment) = deployment {
        let applier = tether_cluster::Applier::new(
            tether_cluster::Resources::new(client.clone()),
            args.namespace.clone(),
        );
        let applied = applier.apply(&deployment, false).await?;
        outln!("{} {}", applied.object, applied.action);
    }
    if let Some(rule) = single_writer {
        for (object, action) in tether_controller::single_writer::enforce(client, &rule).await? {
            outln!("{object} {action}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
