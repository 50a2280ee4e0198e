//! `tether adopt`: write the live values of an app's emergency drift back
//! into its Git source, as one commit by the operator.

use std::process::ExitCode;

use kube::ResourceExt;
use tether_controller::adopt::{
    AdoptOptions, adopt_records, default_reason, records_of_window, records_to_adopt, window_reason,
};
use tether_controller::api::Application;
use tether_controller::break_glass::request;
use tether_controller::credentials;
use tether_source::adopt::Author;

use super::kubeconfig::Kubeconfig;
use super::out::outln;
use super::selection::application;

/// Adopt live changes into Git: the fields of the app's Emergency drift
/// (changes made during a break-glass window) are written into the source
/// — the manifest's own file and document for plain YAML, a patch for
/// Kustomize, a values override for Helm — and committed with you as the
/// author and the reason in the message, then pushed. The live values are
/// read from the cluster now. Nothing is written when there is nothing to
/// adopt or the source cannot take it (a pinned commit, a tag, a field a
/// Helm value does not set: the patch to make by hand is printed).
///
/// Exit codes: 0 committed and pushed, 2 error (a refused push keeps the
/// commit in a local clone and says where).
///
/// Example: `tether adopt shop --message "INC-1234: keep 5 replicas" --branch adopt/inc-1234`
#[derive(Debug, clap::Args)]
pub struct AdoptArgs {
    /// The Application.
    pub app: String,
    /// Namespace the Application lives in.
    #[arg(long, short = 'n', default_value = "tether-system")]
    pub namespace: String,
    /// Commit on a new branch (pushed there) instead of the tracked branch.
    #[arg(long)]
    pub branch: Option<String>,
    /// Why the live changes were made; the commit message's subject.
    #[arg(long, short = 'm')]
    pub message: Option<String>,
    /// The commit author, `Name <email>` (default: git's user.name and user.email).
    #[arg(long)]
    pub author: Option<String>,
    /// Also adopt Manual drift (changes made outside any break-glass window).
    #[arg(long)]
    pub all_drift: bool,
    /// Adopt the changes this break-glass window recorded (default: the
    /// app's current Emergency drift); its reason becomes the commit's.
    #[arg(long)]
    pub window: Option<String>,
    #[command(flatten)]
    pub kubeconfig: Kubeconfig,
}

pub async fn run(args: AdoptArgs) -> anyhow::Result<ExitCode> {
    let author = author(args.author.as_deref())?;
    let client = args.kubeconfig.connect().await?;
    let app = application(client.clone(), &args.namespace, &args.app).await?;
    let window = match &args.window {
        Some(name) => Some(request::find(&client, &args.namespace, None, Some(name)).await?),
        None => None,
    };
    let records = match &window {
        Some(window) => {
            let records = records_of_window(window);
            if records.is_empty() {
                anyhow::bail!(
                    "BreakGlass {}/{}: recorded no change; there is nothing to adopt",
                    args.namespace,
                    window.name_any()
                );
            }
            records
        }
        None => records_to_adopt(&app, args.all_drift)?,
    };
    let reason = match (&args.message, &window) {
        (Some(message), _) => message.clone(),
        (None, Some(window)) => window_reason(window),
        (None, None) => default_reason(&app, &records),
    };
    commit(client, &app, &records, &reason, author, args.branch.clone()).await?;
    Ok(ExitCode::SUCCESS)
}

/// Adopts `records` of `app` as one commit by `author`, pushed with the
/// app's repository credentials (read with `client`), and prints it.
pub async fn commit(
    client: kube::Client,
    app: &Application,
    records: &[tether_controller::adopt::AdoptRecord],
    reason: &str,
    author: Author,
    branch: Option<String>,
) -> anyhow::Result<()> {
    // The repository written to may need the Application's credentials.
    let namespace = app.namespace().unwrap_or_default();
    let credentials = credentials::read(&client, &namespace, app.spec.adopt_source()).await?;
    let options = AdoptOptions {
        author,
        branch,
        credentials,
        sandbox: Default::default(),
    };
    let adopted = adopt_records(client.clone(), app, records, reason, &options).await?;
    outln!(
        "adopted into {} on branch {}: commit {}",
        adopted.files.join(", "),
        adopted.branch,
        adopted.commit
    );
    for record in records {
        for field in &record.fields {
            outln!("  {}: {}", record.object, field.path);
        }
    }
    wake(client, app).await
}

/// Has the controller fetch the adopted commit now rather than at its next
/// resync: a sync request on an automated app (it syncs to the branch tip
/// anyway); a manual app waits for `tether sync`, which is said.
async fn wake(client: kube::Client, app: &Application) -> anyhow::Result<()> {
    let (namespace, name) = (app.namespace().unwrap_or_default(), app.name_any());
    if app.spec.sync_policy.automated {
        tether_controller::request::request_sync(client, &namespace, &name, false).await?;
        outln!("Application {namespace}/{name}: asked to sync the commit now");
    } else {
        outln!(
            "Application {namespace}/{name} does not sync automatically: `tether sync {name}` applies the commit"
        );
    }
    Ok(())
}

/// The commit's author: `--author` as given, else the operator as git
/// knows them.
pub fn author(given: Option<&str>) -> anyhow::Result<Author> {
    match given {
        Some(text) => text.parse().map_err(anyhow::Error::msg),
        None => git_identity(),
    }
}

/// The operator as git knows them.
pub fn git_identity() -> anyhow::Result<Author> {
    let get = |key: &str| -> Option<String> {
        let output = std::process::Command::new("git")
            .args(["config", "--get", key])
            .output()
            .ok()?;
        let value = String::from_utf8_lossy(&output.stdout).trim().to_string();
        (output.status.success() && !value.is_empty()).then_some(value)
    };
    match (get("user.name"), get("user.email")) {
        (Some(name), Some(email)) => Ok(Author { name, email }),
        _ => anyhow::bail!(
            "who is adopting? pass --author \"Name <email>\" (git has no user.name/user.email)"
        ),
    }
}
