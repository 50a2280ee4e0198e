//! `tether break-glass`: open, list, show, extend and close the audited
//! windows in which self-heal leaves (part of) an application alone.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use kube::ResourceExt;
use kube::api::Api;
use tether_controller::adopt::{AdoptError, records_of_window, window_reason};
use tether_controller::api::BreakGlass;
use tether_controller::api::break_glass::Resolution;
use tether_controller::break_glass::audit;
use tether_controller::break_glass::request::{self, Opening};
use tether_core::window::{WindowPhase, parse_ttl, within_cap};
use tether_source::adopt::AdoptError as SourceAdoptError;

use super::columns::aligned;
use super::out::{out, outln};
use super::selection::application;

/// Break-glass windows: suspend self-heal for an app (or some of its
/// objects) during an incident, with who, why and until when recorded; every
/// change made inside is recorded as Emergency drift in the window and its
/// audit log. Afterwards adopt the changes into Git (`tether adopt`) or let
/// self-heal revert them.
#[derive(Debug, clap::Args)]
pub struct BreakGlassArgs {
    #[command(subcommand)]
    pub command: BreakGlassCommand,
    /// Namespace the Application and its windows live in.
    #[arg(long, short = 'n', default_value = "tether-system", global = true)]
    pub namespace: String,
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, env = "TETHER_KUBECONFIG", global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The longest time to live `open` and `extend` ask for: the
    /// controller's `--max-break-glass-ttl` (it treats longer windows as
    /// Invalid, and the admission policy refuses them).
    #[arg(long, default_value = "24h", global = true)]
    pub max_ttl: String,
}

#[derive(Debug, clap::Subcommand)]
pub enum BreakGlassCommand {
    /// Open a window. Example: `tether break-glass open shop --resource
    /// Deployment/web --reason "INC-1234: checkout 500s" --ttl 2h`
    Open {
        app: String,
        /// An object of the app in scope, KIND/NAME (repeat; default: the whole app).
        #[arg(long = "resource")]
        resources: Vec<String>,
        /// Why: the incident reference and a sentence.
        #[arg(long)]
        reason: String,
        /// How long self-heal stays suspended: 90s, 30m, 2h, 1h30m.
        #[arg(long, default_value = "1h")]
        ttl: String,
        /// Return once the window is created, without waiting for the
        /// controller to open it (until it does, self-heal may still revert
        /// changes in its scope).
        #[arg(long)]
        no_wait: bool,
        /// How long to wait for the controller to open the window, in seconds.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
    },
    /// List windows (of one app, or all), newest first.
    List { app: Option<String> },
    /// Show one window: who, why, scope, phase and the changes recorded,
    /// with the audit log checked: the controller's verdict (it verifies
    /// every record's HMAC seal with its key) and this command's own check
    /// of the sequence against the count in status. Exit code 1 when the
    /// log has a gap or a forged record.
    Show {
        /// The window's name, or an app with one open window.
        name: String,
        /// Where the audit records are when the controller has not said
        /// yet (its `--lease-namespace`).
        #[arg(long, default_value = "tether-system")]
        controller_namespace: String,
    },
    /// Extend an open window from now; recorded as an entry of its own.
    Extend {
        /// The window's name, or an app with one open window.
        name: String,
        #[arg(long)]
        ttl: String,
        #[arg(long)]
        reason: String,
    },
    /// Close an open window: `adopt` commits its changes into Git first (as
    /// `tether adopt --window`), `revert` lets self-heal converge back to Git now.
    Close {
        /// The window's name, or an app with one open window.
        name: String,
        #[arg(long, value_parser = super::word::<Resolution>())]
        resolve: Resolution,
        /// With `adopt`: the commit author, `Name <email>` (default: git's user).
        #[arg(long)]
        author: Option<String>,
        /// With `adopt`: commit on this new branch instead of the tracked one.
        #[arg(long)]
        branch: Option<String>,
        /// With `adopt`: the changes are already in Git (`tether adopt` ran).
        #[arg(long)]
        already_adopted: bool,
    },
}

pub async fn run(args: BreakGlassArgs) -> anyhow::Result<ExitCode> {
    let max_ttl = parse_ttl(&args.max_ttl)?;
    // A time to live beyond the cap is refused before anything is asked.
    if let BreakGlassCommand::Open { ttl, .. } | BreakGlassCommand::Extend { ttl, .. } =
        &args.command
    {
        within_cap(parse_ttl(ttl)?, max_ttl)?;
    }
    let client = tether_cluster::connect(args.kubeconfig.as_deref()).await?;
    let namespace = args.namespace;
    match args.command {
        BreakGlassCommand::Open {
            app,
            resources,
            reason,
            ttl,
            no_wait,
            timeout,
        } => {
            let opening = Opening {
                namespace,
                app,
                resources: resources
                    .iter()
                    .map(|r| request::parse_resource(r))
                    .collect::<Result<Vec<_>, _>>()?,
                reason,
                ttl: parse_ttl(&ttl)?,
                max_ttl,
            };
            let wait = (!no_wait).then(|| Duration::from_secs(timeout));
            open(&client, opening, wait).await?;
        }
        BreakGlassCommand::List { app } => list_windows(client, &namespace, app).await?,
        BreakGlassCommand::Show {
            name,
            controller_namespace,
        } => return show_window(&client, &namespace, &name, controller_namespace).await,
        BreakGlassCommand::Extend { name, ttl, reason } => {
            let window = find(&client, &namespace, &name).await?;
            let window =
                request::extend(&client, &window, parse_ttl(&ttl)?, max_ttl, &reason).await?;
            outln!(
                "BreakGlass {namespace}/{} extended until {}",
                window.name_any(),
                window.expires_at()
            );
        }
        BreakGlassCommand::Close {
            name,
            resolve,
            author,
            branch,
            already_adopted,
        } => {
            let window = find(&client, &namespace, &name).await?;
            if resolve == Resolution::Adopt && !already_adopted {
                // Adopt first: closing resumes self-heal, which would revert
                // whatever is not in Git yet.
                adopt(&client, &window, author.as_deref(), branch).await?;
            }
            request::close(&client, &window, resolve).await?;
            outln!(
                "BreakGlass {namespace}/{} closed ({}); self-heal resumes for Application {}",
                window.name_any(),
                match resolve {
                    Resolution::Adopt => "changes adopted into Git",
                    Resolution::Revert => "changes will be reverted",
                },
                window.spec.application
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `tether break-glass open`: creates the window and, unless `wait` is
/// None, waits that long for the controller to open it.
async fn open(
    client: &kube::Client,
    opening: Opening,
    wait: Option<Duration>,
) -> anyhow::Result<()> {
    let namespace = opening.namespace.clone();
    let mut window = request::open(client, opening).await?;
    if let Some(within) = wait {
        window = request::opened(client, &window, within).await?;
    }
    outln!(
        "BreakGlass {namespace}/{} opened by {} until {}{}",
        window.name_any(),
        window.spec.opened_by.username,
        window.spec.expires_at,
        match wait {
            Some(_) => "; self-heal is suspended in its scope",
            None => " (not waiting for the controller)",
        }
    );
    Ok(())
}

/// `tether break-glass list`: newest first, of one app when given.
async fn list_windows(
    client: kube::Client,
    namespace: &str,
    app: Option<String>,
) -> anyhow::Result<()> {
    let api: Api<BreakGlass> = Api::namespaced(client, namespace);
    let mut windows: Vec<BreakGlass> = api
        .list(&Default::default())
        .await
        .with_context(|| format!("BreakGlasses in namespace {namespace}"))?
        .items
        .into_iter()
        .filter(|w| app.as_ref().is_none_or(|a| &w.spec.application == a))
        .collect();
    windows.sort_by_key(|w| std::cmp::Reverse(w.creation_timestamp()));
    out!("{}", list(&windows));
    Ok(())
}

/// `tether break-glass show`: the window, the controller's verdict on its
/// audit log and this user's own check of it; exit code 1 when either
/// finds the log broken.
async fn show_window(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    controller_namespace: String,
) -> anyhow::Result<ExitCode> {
    let window = find(client, namespace, name).await?;
    out!("{}", show(&window));
    let verdict = window.status.as_ref().and_then(|s| s.audit_chain.clone());
    let records_namespace = verdict
        .as_ref()
        .map_or(controller_namespace, |v| v.namespace.clone());
    let mut broken = false;
    match &verdict {
        Some(verdict) => {
            outln!("audit log (controller): {}", verdict.message);
            broken |= verdict.state.is_broken();
        }
        None => outln!("audit log (controller): not checked yet"),
    }
    match audit::check(client, &records_namespace, &window, None).await {
        Ok(checked) => {
            outln!(
                "audit log (here, in {records_namespace}): {}",
                checked.report.message()
            );
            broken |= checked.report.state.is_broken();
        }
        // Optional: who may not read the controller's namespace
        // still has the controller's verdict above.
        Err(error) => outln!(
            "audit log (here): cannot read the audit records in {records_namespace}: {}",
            tether_cluster::error::describe(&error)
        ),
    }
    Ok(if broken {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Commits the changes recorded in `window` to Git (as `tether adopt
/// --window` does); done already counts as done.
async fn adopt(
    client: &kube::Client,
    window: &BreakGlass,
    author: Option<&str>,
    branch: Option<String>,
) -> anyhow::Result<()> {
    let namespace = window.namespace().unwrap_or_default();
    let records = records_of_window(window);
    if records.is_empty() {
        anyhow::bail!(
            "BreakGlass {namespace}/{}: recorded no change to adopt; close it with --resolve revert",
            window.name_any()
        );
    }
    let author = super::adopt::author(author)?;
    let app = application(client.clone(), &namespace, &window.spec.application).await?;
    let adopted = super::adopt::commit(
        client.clone(),
        &app,
        &records,
        &window_reason(window),
        author,
        branch,
    )
    .await;
    match adopted {
        // `tether adopt --window` got there first: Git already holds the
        // window's changes, so close as adopted.
        Err(error) if already_in_git(&error) => outln!(
            "BreakGlass {namespace}/{}: Git already holds its changes (adopted before)",
            window.name_any()
        ),
        other => other?,
    }
    Ok(())
}

/// Whether adopting failed only because the source already has the live
/// values.
fn already_in_git(error: &anyhow::Error) -> bool {
    matches!(
        error.downcast_ref::<AdoptError>(),
        Some(AdoptError::Source(SourceAdoptError::NothingChanged))
    )
}

/// The window named `name`, else the one open window of app `name`.
async fn find(client: &kube::Client, namespace: &str, name: &str) -> anyhow::Result<BreakGlass> {
    let api: Api<BreakGlass> = Api::namespaced(client.clone(), namespace);
    let window = api
        .get_opt(name)
        .await
        .with_context(|| format!("BreakGlass {namespace}/{name}"))?;
    if let Some(window) = window {
        return Ok(window);
    }
    request::find(client, namespace, Some(name), None)
        .await
        .with_context(|| format!("no BreakGlass named {name}, and as an application"))
}

fn phase(window: &BreakGlass) -> String {
    match window.times() {
        Ok(times) => times.phase(SystemTime::now()).to_string(),
        Err(_) => WindowPhase::Invalid.to_string(),
    }
}

/// NAME APP PHASE OPENED-BY EXPIRES CHANGES REASON.
fn list(windows: &[BreakGlass]) -> String {
    let mut lines = vec![
        [
            "NAME",
            "APP",
            "PHASE",
            "OPENED-BY",
            "EXPIRES",
            "CHANGES",
            "REASON",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for window in windows {
        let count = window.status.as_ref().map(|s| s.record_count).unwrap_or(0);
        lines.push(vec![
            window.name_any(),
            window.spec.application.clone(),
            phase(window),
            window.spec.opened_by.username.clone(),
            window.expires_at().to_string(),
            count.to_string(),
            window.spec.reason.clone(),
        ]);
    }
    aligned(&lines)
}

fn show(window: &BreakGlass) -> String {
    let spec = &window.spec;
    let mut text = format!(
        "BreakGlass {}/{}\n  application: {}\n  phase:       {}\n  opened by:   {}{}\n  reason:      {}\n  opened at:   {}\n  expires at:  {}\n",
        window.namespace().unwrap_or_default(),
        window.name_any(),
        spec.application,
        phase(window),
        spec.opened_by.username,
        if spec.opened_by.groups.is_empty() {
            String::new()
        } else {
            format!(" ({})", spec.opened_by.groups.join(", "))
        },
        spec.reason,
        window
            .creation_timestamp()
            .map(|t| t.0.to_string())
            .unwrap_or_default(),
        window.expires_at(),
    );
    let scope = if spec.resources.is_empty() {
        "the whole application".to_string()
    } else {
        spec.resources
            .iter()
            .map(|r| format!("{}/{}", r.kind, r.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    text.push_str(&format!("  scope:       {scope}\n"));
    for extension in &spec.extensions {
        text.push_str(&format!(
            "  extended by {} at {} to {}: {}\n",
            extension.by, extension.at, extension.expires_at, extension.reason
        ));
    }
    if let Some(close) = &spec.close {
        text.push_str(&format!(
            "  closed by {} at {} ({:?})\n",
            close.by, close.at, close.resolve
        ));
    }
    let status = window.status.clone().unwrap_or_default();
    text.push_str(&format!(
        "  changes:     {} recorded{}\n",
        status.record_count,
        if status.record_count as usize > status.records.len() {
            format!(" (newest {} shown)", status.records.len())
        } else {
            String::new()
        }
    ));
    for record in &status.records {
        for field in &record.fields {
            let show = |v: &Option<serde_json::Value>| {
                v.as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_else(|| "(absent)".into())
            };
            let writer = field
                .writer
                .as_ref()
                .map(|w| format!(" by {}", w.manager))
                .unwrap_or_default();
            text.push_str(&format!(
                "    #{} {} {}: {} → {}{writer} ({})\n",
                record.sequence,
                record.object,
                field.path,
                show(&field.desired),
                show(&field.live),
                record.recorded_at
            ));
        }
    }
    text
}
