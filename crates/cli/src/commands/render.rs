//! `tether render`: print the desired objects a source renders to.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Render a directory of manifests and print the objects, in apply order's
/// input order, as a YAML stream with their origins.
///
/// Example: `tether render --path examples/shop`
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// Directory of YAML/JSON manifests.
    #[arg(long)]
    pub path: PathBuf,
}

pub fn run(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let manifests = tether_source::render_directory(&args.path)
        .with_context(|| format!("rendering {}", args.path.display()))?;
    for manifest in &manifests {
        println!("---\n# {}: {}", manifest.id, manifest.origin);
        println!("{}", serde_json::to_string_pretty(&manifest.object)?);
    }
    Ok(ExitCode::SUCCESS)
}
