//! Running a renderer binary in a sandbox: inside the materialized
//! directory, with no network, a time limit and an output-size limit.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{RenderError, Sandbox};

/// Runs `program args` in `dir`, feeding it `input`, and returns its
/// standard output.
///
/// The network is cut: in a fresh network namespace when `unshare -n` works
/// (root, or user namespaces), else through proxy variables pointing at a
/// closed loopback port (Go binaries such as kustomize and helm honour them).
/// The environment is cleared apart from `PATH`, and `HOME` is `dir`.
pub fn run(
    renderer: &str,
    dir: &Path,
    program: &str,
    args: &[String],
    input: Option<&str>,
    sandbox: &Sandbox,
) -> Result<Vec<u8>, RenderError> {
    let mut command = if network_namespaces_work() {
        let mut command = Command::new("unshare");
        command.arg("-n").arg("--").arg(program);
        command
    } else {
        Command::new(program)
    };
    command
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for proxy in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "ALL_PROXY",
    ] {
        command.env(proxy, "http://127.0.0.1:9");
    }
    let failed = |message: String| RenderError::Failed {
        renderer: renderer.to_string(),
        message,
    };
    let mut child = command
        .spawn()
        .map_err(|e| failed(format!("cannot run {program}: {e}")))?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        let input = input.to_string();
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = stdin.write_all(input.as_bytes());
        });
    }
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let limit = sandbox.max_output_bytes;
    let overflow = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = overflow.clone();
    let out_reader = std::thread::spawn(move || {
        let read = read_limited(stdout, limit);
        flag.store(read.1, std::sync::atomic::Ordering::SeqCst);
        read
    });
    let err_reader = std::thread::spawn(move || read_limited(stderr, 64 * 1024));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| failed(e.to_string()))? {
            break status;
        }
        if started.elapsed() > sandbox.timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RenderError::TimedOut {
                renderer: renderer.to_string(),
                after: sandbox.timeout,
            });
        }
        if overflow.load(std::sync::atomic::Ordering::SeqCst) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RenderError::OutputTooLarge {
                renderer: renderer.to_string(),
                limit,
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let (output, overflowed) = out_reader.join().unwrap_or_default();
    let (errors, _) = err_reader.join().unwrap_or_default();
    if overflowed {
        return Err(RenderError::OutputTooLarge {
            renderer: renderer.to_string(),
            limit,
        });
    }
    if !status.success() {
        let errors = String::from_utf8_lossy(&errors);
        return Err(failed(format!("{status}: {}", errors.trim())));
    }
    Ok(output)
}

/// Reads up to `limit` bytes; the flag says whether there was more.
fn read_limited(reader: impl Read, limit: usize) -> (Vec<u8>, bool) {
    let mut buffer = Vec::new();
    let mut limited = reader.take(limit as u64 + 1);
    let _ = limited.read_to_end(&mut buffer);
    let overflowed = buffer.len() > limit;
    buffer.truncate(limit);
    (buffer, overflowed)
}

fn network_namespaces_work() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| {
        Command::new("unshare")
            .args(["-n", "--", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}
