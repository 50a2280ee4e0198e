//! `tether diff`: what a sync would change, per object, as a unified diff.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::Value;
use similar::{ChangeTag, TextDiff};
use tether_controller::sync::preview::{Preview, preview, preview_application};
use tether_core::diff::normalize;
use tether_core::diff::secret::masked_for_display;

use super::kubeconfig::Kubeconfig;
use super::local::{Directory, repositories};
use super::out::{out, outln};
use super::selection::application;

/// Show what a sync would change: a unified diff per object of live state
/// against Git (after server-side dry-run, so server defaults and fields
/// other writers own are not shown). Secret values are masked.
///
/// Exit codes: 0 no difference, 1 differences, 2 error.
///
/// Examples: `tether diff shop` · `tether diff --path examples/shop --namespace shop`
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// An Application to diff (its source is fetched).
    pub app: Option<String>,
    /// A local directory of manifests instead of an Application.
    #[arg(long, conflicts_with = "app")]
    pub path: Option<PathBuf>,
    /// With --path: the namespace for objects that do not name one. With an
    /// APP: the namespace the Application lives in.
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Never colour the output.
    #[arg(long)]
    pub no_color: bool,
    #[command(flatten)]
    pub kubeconfig: Kubeconfig,
}

pub async fn run(args: DiffArgs) -> anyhow::Result<ExitCode> {
    let client = args.kubeconfig.connect().await?;
    let previews = match (&args.app, &args.path) {
        (Some(name), _) => {
            let namespace = args
                .namespace
                .clone()
                .unwrap_or_else(|| "tether-system".into());
            let app = application(client.clone(), &namespace, name).await?;
            preview_application(&client, &app, None, repositories())
                .await?
                .previews
        }
        (None, Some(path)) => {
            let dir = Directory::render(client, path, args.namespace.as_deref(), None)?;
            preview(&dir.applier, &dir.app, &dir.manifests, &[], None).await?
        }
        (None, None) => anyhow::bail!("name an Application, or give --path DIR"),
    };
    let colour = !args.no_color && std::io::stdout().is_terminal();
    let mut differences = 0;
    for preview in previews.iter().filter(|p| p.changes()) {
        differences += 1;
        out!("{}", render(preview, colour));
    }
    if differences == 0 {
        outln!("no differences ({} objects)", previews.len());
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{differences} of {} objects differ", previews.len());
    Ok(ExitCode::from(1))
}

/// A unified diff of one object, live (`-`) against desired (`+`).
fn render(preview: &Preview, colour: bool) -> String {
    let as_text = |object: Option<&Value>| -> String {
        object
            .map(|o| {
                serde_saphyr::to_string(&masked_for_display(&normalize(o))).unwrap_or_default()
            })
            .unwrap_or_default()
    };
    let (live, desired) = (
        as_text(preview.live.as_ref()),
        as_text(Some(&preview.desired)),
    );
    let mut out = format!("--- {} (live)\n+++ {} (git)\n", preview.id, preview.id);
    let diff = TextDiff::from_lines(&live, &desired);
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        out.push_str(&format!("{}\n", hunk.header()));
        for change in hunk.iter_changes() {
            let (sign, code) = match change.tag() {
                ChangeTag::Delete => ('-', "31"),
                ChangeTag::Insert => ('+', "32"),
                ChangeTag::Equal => (' ', ""),
            };
            let line = format!("{sign}{}", change.value().trim_end_matches('\n'));
            if colour && !code.is_empty() {
                out.push_str(&format!("\x1b[{code}m{line}\x1b[0m\n"));
            } else {
                out.push_str(&format!("{line}\n"));
            }
        }
    }
    out
}
