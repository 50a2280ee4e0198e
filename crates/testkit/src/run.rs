//! Running the real tools a test drives (`git`, `kubectl`, …), failing
//! the test with the tool's own words when one fails.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `command`, which must succeed (else the test fails with the
/// command line and its stderr); returns its stdout.
pub fn run_ok(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{}: {error}", command_line(command)));
    succeeded(command, output)
}

/// Runs `command` with `input` on its standard input.
pub fn run_with_stdin(command: &mut Command, input: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("{}: {error}", command_line(command)));
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input.as_bytes())
        .expect("the command reads its stdin");
    child.wait_with_output().expect("the command runs")
}

/// [`run_with_stdin`] for a command that must succeed; returns its stdout.
pub fn run_ok_with_stdin(command: &mut Command, input: &str) -> String {
    let output = run_with_stdin(command, input);
    succeeded(command, output)
}

fn succeeded(command: &Command, output: Output) -> String {
    assert!(
        output.status.success(),
        "{}: {}",
        command_line(command),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `git ARGS` in `dir` with a fixed test identity and no system or user
/// configuration, so the machine's `~/.gitconfig` changes nothing.
pub fn git_command(dir: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("git");
    command
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com");
    command
}

/// Runs `git ARGS` in `dir` (see [`git_command`]), which must succeed;
/// returns its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    run_ok(&mut git_command(dir, args)).trim().to_string()
}

fn command_line(command: &Command) -> String {
    let args: Vec<_> = command.get_args().map(|a| a.to_string_lossy()).collect();
    format!("{} {args:?}", command.get_program().to_string_lossy())
}

/// Runs `gpg ARGS` in GnuPG home `home`, unattended and with an empty
/// passphrase, which must succeed; returns its stdout.
pub fn gpg(home: &Path, args: &[&str]) -> String {
    run_ok(
        Command::new("gpg")
            .env("GNUPGHOME", home)
            .args(["--batch", "--pinentry-mode", "loopback", "--passphrase", ""])
            .args(args),
    )
}
