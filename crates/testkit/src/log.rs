//! The controller's log during a test process, kept in a file so that a
//! failing test can show what the controller was doing.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The log file of this test process, set up on first call: every
/// `tracing` event at info and above (or `TETHER_LOG`) goes there.
static FILE: OnceLock<PathBuf> = OnceLock::new();

pub fn log_file() -> &'static PathBuf {
    FILE.get_or_init(|| {
        let path = std::env::temp_dir().join(format!("tether-test-{}.log", std::process::id()));
        if let Ok(file) = std::fs::File::create(&path) {
            let filter = tracing_subscriber::EnvFilter::try_from_env("TETHER_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .try_init();
        }
        path
    })
}

/// The last `lines` lines of the log that mention `needle` (e.g. a test's
/// namespace), for a failure message.
pub fn log_tail(needle: &str, lines: usize) -> String {
    let text = std::fs::read_to_string(log_file()).unwrap_or_default();
    let matching: Vec<&str> = text.lines().filter(|l| l.contains(needle)).collect();
    matching[matching.len().saturating_sub(lines)..].join("\n")
}

/// The log's last `lines` lines, if this process set the log up.
pub(crate) fn tail_if_logging(lines: usize) -> Option<String> {
    FILE.get().map(|_| log_tail("", lines))
}
