//! The `tether` subcommands, one file each.

mod adopt;
mod app;
mod app_delete;
mod break_glass;
mod cluster;
mod columns;
mod dashboard;
mod diff;
mod drift;
mod health;
mod import;
mod install;
mod kubeconfig;
mod local;
pub(crate) mod out;
mod render;
mod rollback;
mod run;
mod selection;
mod status;
mod sync;
mod uninstall;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Tether keeps a Kubernetes cluster tethered to Git.
#[derive(Debug, Parser)]
#[command(name = "tether", version, about, long_about = None)]
pub struct Cli {
    /// Log what happens (or set TETHER_LOG, e.g. TETHER_LOG=debug).
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// Log lines as text (coloured only on a terminal) or as JSON, one
    /// object per line, for log pipelines.
    #[arg(long, env = "TETHER_LOG_FORMAT", default_value = "text", global = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Adopt(adopt::AdoptArgs),
    App(app::AppArgs),
    BreakGlass(break_glass::BreakGlassArgs),
    Cluster(cluster::ClusterArgs),
    Dashboard(dashboard::DashboardArgs),
    Diff(diff::DiffArgs),
    Drift(drift::DriftArgs),
    Health(health::HealthArgs),
    Import(import::ImportArgs),
    Install(install::InstallArgs),
    Render(render::RenderArgs),
    Rollback(rollback::RollbackArgs),
    Run(run::RunArgs),
    Status(status::StatusArgs),
    Sync(sync::SyncArgs),
    Uninstall(uninstall::UninstallArgs),
}

pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Adopt(args) => adopt::run(args).await,
        Command::App(args) => app::run(args).await,
        Command::BreakGlass(args) => break_glass::run(args).await,
        Command::Cluster(args) => cluster::run(args).await,
        Command::Dashboard(args) => dashboard::run(args).await,
        Command::Diff(args) => diff::run(args).await,
        Command::Drift(args) => drift::run(args).await,
        Command::Health(args) => health::run(args),
        Command::Import(args) => import::run(args).await,
        Command::Install(args) => install::run(args).await,
        Command::Rollback(args) => rollback::run(args).await,
        Command::Run(args) => run::run(args).await,
        Command::Status(args) => status::run(args).await,
        Command::Render(args) => render::run(args),
        Command::Sync(args) => sync::run(args).await,
        Command::Uninstall(args) => uninstall::run(args).await,
    }
}

/// Parses an argument as a word of vocabulary `T`; `--help` and a wrong
/// value list its words.
pub(crate) fn word<T>() -> impl clap::builder::TypedValueParser<Value = T>
where
    T: tether_core::Vocabulary + Clone + Send + Sync + 'static,
{
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(T::ALL.iter().map(|word| word.as_str()))
        .try_map(|text| T::parse(&text))
}
