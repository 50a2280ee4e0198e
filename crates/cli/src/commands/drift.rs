//! `tether drift`: which objects differ from Git, which fields, who changed
//! them, and what Tether did about it.

use std::process::ExitCode;

use super::selection::Selection;
use tether_controller::observe::drift::{rows, table};

/// Show drift: per object and field the desired and live values (Secret
/// values masked), the writer (field manager, operation, time), the kind
/// (Manual, Accidental, Emergency) and the response (Healed, Reported,
/// BackedOff); then orphans (objects no longer in Git) and their prune fate.
///
/// Exit code: 0 no unresolved drift or orphan, 1 some, 2 error.
/// Example: `tether drift shop` or `tether drift -o json`
#[derive(Debug, clap::Args)]
pub struct DriftArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// Output format.
    #[arg(long, short = 'o', default_value = "table", value_parser = ["table", "json"])]
    pub output: String,
}

pub async fn run(args: DriftArgs) -> anyhow::Result<ExitCode> {
    let apps = args.selection.applications().await?;
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
