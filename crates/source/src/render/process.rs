//! Running a renderer binary in a sandbox: inside the materialized
//! directory, with no network, a time limit and an output-size limit.
//!
//! With [`SandboxMode::Required`] the binary runs under bubblewrap
//! (`bwrap`): it sees the materialized source (read-only, at `/src`),
//! itself (at `/renderer`), the system's programs and libraries (`/usr`,
//! read-only, without `/usr/local`), an empty 64 MiB `/tmp` and fresh
//! `/proc` and `/dev`; no `/etc`, `/home`, `/root`, `/var`, `/run` and no
//! network. A link or path check that misses an escape then finds nothing
//! to read.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::stderr::one_line;
use super::{RenderError, Sandbox, SandboxMode, find_program};

/// Where the materialized source is mounted inside the sandbox.
const SOURCE: &str = "/src";
/// Where the renderer binary is mounted inside the sandbox.
const RENDERER: &str = "/renderer";
/// The size of the sandbox's `/tmp`.
const TMP_BYTES: usize = 64 * 1024 * 1024;

/// What to run: `program args` in `dir`, a directory under the materialized
/// source `root`.
pub struct Run<'a> {
    /// The name used in messages (`helm`, `jsonnet: apps/web/main.jsonnet`).
    pub renderer: &'a str,
    pub root: &'a Path,
    pub dir: &'a Path,
    pub program: &'a Path,
    pub args: &'a [String],
    pub input: Option<&'a str>,
    /// Whether the program limits its own memory to
    /// `Sandbox::max_memory_bytes` (the Jsonnet child does), so that an
    /// abort is reported as that limit.
    pub memory_limited: bool,
}

/// Runs the renderer and returns its standard output.
///
/// Outside the sandbox (`SandboxMode::Off`) the network is still cut: in a
/// fresh network namespace when `unshare -n` works, else through proxy
/// variables pointing at a closed loopback port (Go binaries such as
/// kustomize and helm honour them). The environment is cleared apart from
/// `PATH` and `HOME`.
pub fn run(run: &Run<'_>, sandbox: &Sandbox) -> Result<Vec<u8>, RenderError> {
    let renderer = run.renderer;
    let failed = |message: String| RenderError::Failed {
        renderer: renderer.to_string(),
        message,
    };
    let mut command = renderer_command(run, sandbox)?;
    let mut child = command
        .spawn()
        .map_err(|e| failed(format!("cannot run {}: {e}", run.program.display())))?;
    if let (Some(input), Some(mut stdin)) = (run.input, child.stdin.take()) {
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
        // Rust's allocator reports an allocation refused by RLIMIT_AS this
        // way, then aborts.
        if run.memory_limited
            && (errors.contains("memory allocation of") || status.signal() == Some(SIGABRT))
        {
            return Err(RenderError::MemoryLimit {
                renderer: renderer.to_string(),
                limit: sandbox.max_memory_bytes,
            });
        }
        return Err(failed(format!("{status}: {}", one_line(&errors))));
    }
    Ok(output)
}

/// The command that runs `run`: under bubblewrap, or (sandbox off) in a
/// fresh network namespace where it can; with a cleared environment but
/// for `PATH`, `HOME` and proxies that lead nowhere.
fn renderer_command(run: &Run<'_>, sandbox: &Sandbox) -> Result<Command, RenderError> {
    let mut command = match sandbox.mode {
        SandboxMode::Required => {
            let bwrap = bubblewrap(sandbox).map_err(|reason| RenderError::SandboxUnavailable {
                renderer: run.renderer.to_string(),
                reason,
            })?;
            let mut command = Command::new(bwrap);
            command.args(bwrap_args(run)?);
            command
        }
        SandboxMode::Off => {
            let mut command = if network_namespaces_work() {
                let mut command = Command::new("unshare");
                command.arg("-n").arg("--").arg(run.program);
                command
            } else {
                Command::new(run.program)
            };
            command.current_dir(run.dir);
            command
        }
    };
    command
        .args(run.args)
        .env_clear()
        .stdin(if run.input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match sandbox.mode {
        SandboxMode::Required => command.env("HOME", "/tmp").env("PATH", "/usr/bin:/bin"),
        SandboxMode::Off => command
            .env("HOME", run.dir)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default()),
    };
    for proxy in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
        "ALL_PROXY",
    ] {
        command.env(proxy, "http://127.0.0.1:9");
    }
    Ok(command)
}

/// The signal number of SIGABRT on every Linux architecture.
const SIGABRT: i32 = 6;

/// The bubblewrap arguments that show the renderer nothing but the
/// materialized source, itself and the system's programs and libraries.
fn bwrap_args(run: &Run<'_>) -> Result<Vec<String>, RenderError> {
    let program = std::fs::canonicalize(run.program).map_err(|e| RenderError::Failed {
        renderer: run.renderer.to_string(),
        message: format!("cannot run {}: {e}", run.program.display()),
    })?;
    let inside = run.dir.strip_prefix(run.root).unwrap_or(Path::new(""));
    let chdir = Path::new(SOURCE).join(inside);
    let mut args: Vec<String> = [
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--ro-bind",
    ]
    .map(String::from)
    .into();
    args.push(run.root.to_string_lossy().into_owned());
    args.push(SOURCE.into());
    args.extend(system_mounts());
    args.extend([
        "--ro-bind".into(),
        program.to_string_lossy().into_owned(),
        RENDERER.into(),
        "--proc".into(),
        "/proc".into(),
        "--dev".into(),
        "/dev".into(),
        // HOME: helm keeps its caches here. Bounded, as it is memory.
        "--size".into(),
        TMP_BYTES.to_string(),
        "--tmpfs".into(),
        "/tmp".into(),
        "--chdir".into(),
        chdir.to_string_lossy().into_owned(),
        "--".into(),
        RENDERER.into(),
    ]);
    Ok(args)
}

/// `/usr` read-only but for `/usr/local`, and the top-level `/bin`, `/lib`,
/// `/lib64`, `/sbin` as the host has them (links into `/usr` on a
/// merged-/usr system, directories elsewhere).
fn system_mounts() -> Vec<String> {
    let mut args: Vec<String> = ["--ro-bind", "/usr", "/usr"].map(String::from).into();
    if Path::new("/usr/local").is_dir() {
        args.extend(["--tmpfs".into(), "/usr/local".into()]);
    }
    for top in ["/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin"] {
        let path = Path::new(top);
        if let Ok(target) = std::fs::read_link(path) {
            args.extend([
                "--symlink".into(),
                target.to_string_lossy().into_owned(),
                top.into(),
            ]);
        } else if path.is_dir() {
            args.extend(["--ro-bind".into(), top.into(), top.into()]);
        }
    }
    args
}

/// The `bwrap` binary, once it has been seen to work here; or why not.
pub fn bubblewrap(sandbox: &Sandbox) -> Result<PathBuf, String> {
    let program = find_program("bwrap", sandbox)
        .ok_or_else(|| "`bwrap` is not installed (looked in PATH)".to_string())?;
    static PROBED: std::sync::Mutex<Vec<(PathBuf, Result<(), String>)>> =
        std::sync::Mutex::new(Vec::new());
    let mut probed = PROBED.lock().unwrap_or_else(|e| e.into_inner());
    let known = probed.iter().find(|(path, _)| *path == program);
    let result = match known {
        Some((_, result)) => result.clone(),
        None => {
            let result = probe(&program);
            probed.push((program.clone(), result.clone()));
            result
        }
    };
    result.map(|()| program)
}

/// Runs `true` in the same kind of sandbox the renderers get.
fn probe(bwrap: &Path) -> Result<(), String> {
    let mut args: Vec<String> = ["--unshare-all", "--die-with-parent"]
        .map(String::from)
        .into();
    args.extend(system_mounts());
    args.extend(["--proc", "/proc", "--dev", "/dev", "--", "true"].map(String::from));
    let output = Command::new(bwrap)
        .args(&args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bwrap.display()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} does not work here: {}",
            bwrap.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
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
