//! The `tether` subcommands, one file each.

mod health;
mod render;
mod sync;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Tether keeps a Kubernetes cluster tethered to Git.
#[derive(Debug, Parser)]
#[command(name = "tether", version, about, long_about = None)]
pub struct Cli {
    /// Log what happens (or set TETHER_LOG, e.g. TETHER_LOG=debug).
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Health(health::HealthArgs),
    Render(render::RenderArgs),
    Sync(sync::SyncArgs),
}

pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Health(args) => health::run(args),
        Command::Render(args) => render::run(args),
        Command::Sync(args) => sync::run(args).await,
    }
}
