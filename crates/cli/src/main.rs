//! `tether`: a GitOps controller for Kubernetes.
//!
//! The binary is thin: it parses arguments, calls library code and prints.
//! Exit codes: 0 success; 1 a difference or failure the command reports
//! (e.g. `diff` found drift); 2 an error (bad input, unreachable cluster).

mod commands;

use std::process::ExitCode;

use clap::Parser;

/// Every allocation counted, with its backtrace (`--features dhat-heap`).
#[cfg(feature = "dhat-heap")]
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// jemalloc, configured at build time (`.cargo/config.toml`) to keep one
/// arena and hand freed pages back at once: the controller holds ~12%
/// less resident memory at 10,000 objects than with glibc's malloc
/// (docs/memory.md, cut 8).
#[cfg(all(not(feature = "dhat-heap"), not(target_env = "msvc")))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // The Jsonnet child the renderers spawn: not a user command, so it is
    // answered before (and outside) argument parsing.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some((first, rest)) = args.split_first()
        && first == tether_source::render::JSONNET_CHILD
    {
        return tether_source::render::jsonnet_child(rest);
    }
    #[cfg(feature = "dhat-heap")]
    let _profiler = heap_profile();
    let cli = commands::Cli::parse();
    // The controller logs what it does; other commands only warnings.
    let controller = matches!(cli.command, commands::Command::Run(_));
    init_logging(cli.verbose || controller, cli.log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: starting the async runtime: {error}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", describe(&error));
            ExitCode::from(2)
        }
    }
}

/// Starts the heap profile. It is written when the profiler is dropped:
/// `TETHER_DHAT_SECONDS` after the start when set (a snapshot of a running
/// controller, caches and all), else as `main` returns.
#[cfg(feature = "dhat-heap")]
fn heap_profile() -> Option<dhat::Profiler> {
    let file = std::env::var_os("TETHER_DHAT_FILE").unwrap_or_else(|| "dhat-heap.json".into());
    let profiler = dhat::Profiler::builder().file_name(file).build();
    let after = std::env::var("TETHER_DHAT_SECONDS").ok();
    let Some(seconds) = after.and_then(|seconds| seconds.parse().ok()) else {
        return Some(profiler);
    };
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(seconds));
        drop(profiler);
    });
    None
}

/// Logs to stderr at `info` when `verbose` (else `warn`, or `TETHER_LOG`),
/// as text coloured only on a terminal, or as JSON lines.
fn init_logging(verbose: bool, format: commands::LogFormat) {
    let default = if verbose { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("TETHER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        commands::LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        commands::LogFormat::Json => logs.json().flatten_event(true).init(),
    }
}

/// The error and its causes on one line, skipping a cause whose text the
/// message before it already includes.
fn describe(error: &anyhow::Error) -> String {
    let mut text = String::new();
    let mut causes = error.chain();
    while let Some(cause) = causes.next() {
        // The API server's answer, not kube's struct of it.
        let cause = match cause.downcast_ref::<kube::Error>() {
            Some(error) => {
                // Its cause is the API server's Status, said here already.
                if matches!(error, kube::Error::Api(_)) {
                    causes.next();
                }
                tether_cluster::error::describe(error)
            }
            None => cause.to_string(),
        };
        if !text.contains(&cause) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_said_once_after_the_object_in_the_servers_words() {
        let message = r#"applications.tether.dev is forbidden: User "alice" cannot list resource "applications" in API group "tether.dev" in the namespace "team-b""#;
        let status = kube::core::Status::failure(message, "Forbidden").with_code(403);
        let error = anyhow::Error::new(kube::Error::Api(status.boxed()))
            .context("Applications in namespace team-b");
        assert_eq!(
            describe(&error),
            format!("Applications in namespace team-b: {message} (Forbidden)")
        );
    }
}
