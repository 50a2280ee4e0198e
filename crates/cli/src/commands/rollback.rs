//! `tether rollback APP`: pin an Application to an earlier revision of its
//! sync history (`spec.pin`), optionally writing a revert commit to its
//! source; `--clear` lifts the pin.

use std::process::ExitCode;

use kube::ResourceExt;
use kube::api::Api;
use tether_controller::api::Application;
use tether_controller::credentials;
use tether_controller::rollback;
use tether_source::adopt::Author;
use tether_source::adopt::revert::{RevertRequest, revert};

use super::adopt::git_identity;
use super::kubeconfig::Kubeconfig;
use super::out::outln;

/// Roll an Application back: pin it (`spec.pin`) to the previous revision
/// it synced — or to history entry `--to ID` (`--history` lists
/// the history) — at once. While pinned, the controller fetches and
/// renders that revision instead of the branch head, self-heal keeps it,
/// condition `Pinned` says who pinned it, why and since when, and the app
/// is OutOfSync with the branch head. `--revert` also commits to the
/// source's branch, as you, the pinned revision's tree for the app's path,
/// pushed with the app's repository credentials; once the branch head
/// renders the pinned state, the controller lifts the pin (`GitMatches`).
/// `--clear` lifts a pin by hand; `--history` lists the ids. An unknown
/// history id changes nothing.
///
/// Exit codes: 0 pinned (or cleared), 2 error.
///
/// Examples: `tether rollback shop --reason "INC-7: bad image"` ·
/// `tether rollback shop --history` · `tether rollback shop --to 3 --revert` ·
/// `tether rollback shop --clear`
#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// The Application.
    pub app: String,
    /// Namespace the Application lives in.
    #[arg(long, short = 'n', default_value = "tether-system")]
    pub namespace: String,
    /// The history entry (`status.history[].id`) to roll back to (default:
    /// the newest one at another revision than the one synced now).
    #[arg(long, conflicts_with = "clear")]
    pub to: Option<u64>,
    /// Why; recorded on the pin, in the condition, in history and in the
    /// revert commit.
    #[arg(long, short = 'm', default_value = "", conflicts_with = "clear")]
    pub reason: String,
    /// Also commit the revert to the source's branch and push it.
    #[arg(long, conflicts_with = "clear")]
    pub revert: bool,
    /// The revert commit's author, `Name <email>` (default: git's
    /// user.name and user.email, else your Kubernetes user name).
    #[arg(long, requires = "revert")]
    pub author: Option<String>,
    /// Lift the pin instead: the app follows its source again.
    #[arg(long)]
    pub clear: bool,
    /// Print the app's sync history (the ids `--to` takes) and the
    /// revision a rollback would pick; change nothing.
    #[arg(long, conflicts_with_all = ["clear", "revert"])]
    pub history: bool,
    #[command(flatten)]
    pub kubeconfig: Kubeconfig,
}

pub async fn run(args: RollbackArgs) -> anyhow::Result<ExitCode> {
    let client = args.kubeconfig.connect().await?;
    let (namespace, name) = (args.namespace.as_str(), args.app.as_str());
    if args.history {
        let app = Api::<Application>::namespaced(client.clone(), namespace)
            .get(name)
            .await?;
        print_history(&app, args.to);
        return Ok(ExitCode::SUCCESS);
    }
    if args.clear {
        let pin = rollback::clear(&client, namespace, name).await?;
        outln!(
            "Application {namespace}/{name}: pin to {} lifted; it follows its source again",
            pin.revision
        );
        return Ok(ExitCode::SUCCESS);
    }
    let author = match &args.author {
        Some(text) => Some(text.parse::<Author>().map_err(anyhow::Error::msg)?),
        None => None,
    };
    let pin = rollback::pin(&client, namespace, name, args.to, &args.reason).await?;
    outln!("Application {namespace}/{name}: {}", pin.describe());
    if args.revert {
        let app = Api::<Application>::namespaced(client.clone(), namespace)
            .get(name)
            .await?;
        let author = match author {
            Some(author) => author,
            None => git_identity().unwrap_or_else(|_| Author {
                name: pin.by.clone(),
                email: format!("{}@kubernetes", pin.by.replace([' ', '<', '>', ':'], "-")),
            }),
        };
        commit_revert(&client, &app, &pin, &author).await?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The history, newest first, and what a rollback would pick.
fn print_history(app: &Application, to: Option<u64>) {
    let history = app
        .status
        .as_ref()
        .map(|s| s.history.as_slice())
        .unwrap_or_default();
    outln!("ID  REVISION      TIME                  INITIATOR  BY / REASON");
    for entry in history {
        let why = [entry.by.as_deref(), entry.reason.as_deref()]
            .into_iter()
            .flatten()
            .filter(|text| !text.is_empty())
            .collect::<Vec<_>>()
            .join(": ");
        outln!(
            "{:<3} {:<13} {:<21} {:<10} {why}",
            entry.id,
            entry.revision.get(..12).unwrap_or(&entry.revision),
            entry.time,
            entry.initiator.as_str()
        );
    }
    match rollback::target(app, to) {
        Ok(target) => outln!(
            "a rollback would pin history {} ({})",
            target.id,
            target.revision
        ),
        Err(why) => outln!("{why}"),
    }
}

/// Commits the pinned revision's tree for `app`'s path to its branch, as
/// `author`, with the app's repository credentials, and prints the commit.
async fn commit_revert(
    client: &kube::Client,
    app: &Application,
    pin: &tether_controller::api::pin::Pin,
    author: &Author,
) -> anyhow::Result<()> {
    let namespace = app.namespace().unwrap_or_default();
    let app_name = format!("{namespace}/{}", app.name_any());
    let source = app.spec.sources()[0].clone();
    let credentials = credentials::read(client, &namespace, &source).await?;
    let (pin, author) = (pin.clone(), author.clone());
    let name = app_name.clone();
    let reverted = tokio::task::spawn_blocking(move || {
        revert(&RevertRequest {
            source: &source,
            app: &name,
            revision: &pin.revision,
            history_id: pin.history_id,
            reason: &pin.reason,
            by: &pin.by,
            author: &author,
            credentials: credentials.as_ref(),
        })
    })
    .await?
    .map_err(|error| anyhow::anyhow!("Application {app_name}: revert commit: {error}"))?;
    match &reverted.commit {
        Some(commit) => outln!(
            "Application {app_name}: revert commit {commit} pushed to branch {} ({} commit(s) undone); the pin lifts once the controller fetches it",
            reverted.branch,
            reverted.undone.len()
        ),
        None => outln!(
            "Application {app_name}: branch {} already has that tree; nothing to commit",
            reverted.branch
        ),
    }
    Ok(())
}
