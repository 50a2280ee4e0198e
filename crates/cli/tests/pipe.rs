//! A command whose reader goes away (`tether status | head -1`) ends
//! quietly, as Unix tools do, instead of panicking.

mod support;

use std::process::Stdio;

use support::{installed, tether_command};

#[tokio::test]
async fn a_closed_pipe_ends_the_command_quietly_without_a_panic() {
    let ns = installed("cli-pipe").await;
    let mut child = tether_command(&ns, &["status", "-n", &ns.name])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the command writes its table.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(output.status.code(), Some(141), "{stderr}");
}
