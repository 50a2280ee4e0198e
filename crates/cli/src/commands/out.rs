//! Standard output for the commands. A reader that went away (`tether
//! status | head -1`) ends the command quietly with status 141, as the
//! default SIGPIPE ends any Unix tool, instead of a panic in `println!`.

use std::io::{ErrorKind, Write};

/// The exit status of a process ended by SIGPIPE, as shells report it.
const BROKEN_PIPE_STATUS: i32 = 128 + 13;

/// Writes `text` to standard output.
pub fn write(text: std::fmt::Arguments<'_>) {
    if let Err(error) = std::io::stdout().lock().write_fmt(text) {
        if error.kind() == ErrorKind::BrokenPipe {
            std::process::exit(BROKEN_PIPE_STATUS);
        }
        eprintln!("error: writing to standard output: {error}");
        std::process::exit(2);
    }
}

/// `print!` that ends quietly on a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::commands::out::write(format_args!($($arg)*))
    };
}

/// `println!` that ends quietly on a closed pipe.
macro_rules! outln {
    () => {
        $crate::commands::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::commands::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};

/// `value` as YAML (`format` "yaml") or pretty JSON (`format` "json"), the
/// `-o yaml|json` of every command.
pub fn print_as<T: serde::Serialize>(value: &T, format: &str) -> anyhow::Result<()> {
    match format {
        "json" => write(format_args!("{}\n", serde_json::to_string_pretty(value)?)),
        "yaml" => write(format_args!("{}", yaml(value)?)),
        other => anyhow::bail!("unknown output format {other:?} (yaml, json)"),
    }
    Ok(())
}

/// `value` as a YAML document, ending with a newline.
pub fn yaml<T: serde::Serialize>(value: &T) -> anyhow::Result<String> {
    let mut text = serde_saphyr::to_string(value)?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}
