//! A real browser for the dashboard's tests: Debian's `chromium`, headless,
//! driven over WebDriver by `chromedriver` on a loopback port (both
//! installed by `scripts/setup.sh`).
//!
//! Chromium is started with everything that would reach the network on
//! its own turned off (updates, sync, metrics, safe browsing, …): the
//! tests' pages are on 127.0.0.1 and nothing else may be contacted.
//! `chromedriver` and its browsers are killed when the [`Browser`] is
//! dropped, or when the test process ends however it ends.

use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::daemon::free_port;

/// How long chromedriver and a session may take to start.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How often an element the live page replaced is looked for again
/// (50 ms apart) before giving up.
const STALE_RETRIES: usize = 20;

/// Runs chromedriver in a process group of its own (so its browsers go
/// with it) and kills the group when standard input closes: when the
/// [`Browser`] is dropped, or when the test process ends. (`sh` is dash on
/// Debian, whose `kill` takes no `--`: with one it kills nothing, and the
/// browsers outlived every test.)
const WATCHDOG: &str = r#"
exec 3<&0
setsid chromedriver "$@" 3<&- &
pid=$!
(cat >/dev/null; kill -KILL "-$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null) <&3 3<&- &
exec 3<&-
wait "$pid"
"#;

/// Chromium's switches: headless, as root in a container (no sandbox, no
/// /dev/shm), and no traffic of its own to anywhere.
const SWITCHES: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--window-size=1400,1000",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--disable-breakpad",
    "--metrics-recording-only",
    "--no-pings",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,CertificateTransparencyComponentUpdater",
];

/// A headless Chromium; killed (with its chromedriver) when dropped.
pub struct Browser {
    pub client: Client,
    child: Child,
    stdin: Option<ChildStdin>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a session;
    /// `dark` asks pages for their dark colour scheme.
    pub async fn start(dark: bool) -> Browser {
        let port = free_port();
        let log = tempfile::NamedTempFile::new()
            .expect("a log file")
            .into_temp_path();
        let child = Command::new("sh")
            .args(["-c", WATCHDOG, "chromedriver"])
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh starts");
        let mut child = child;
        let stdin = child.stdin.take();
        let profile = tempfile::tempdir().expect("a profile directory");
        let mut args: Vec<String> = SWITCHES.iter().map(|s| s.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        if dark {
            args.push("--force-dark-mode".to_string());
            args.push("--blink-settings=preferredColorScheme=0".to_string());
        }
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
        });
        let capabilities = capabilities.as_object().unwrap().clone();
        let deadline = Instant::now() + START_TIMEOUT;
        let url = format!("http://127.0.0.1:{port}");
        let client = loop {
            let connected = ClientBuilder::rustls()
                .expect("rustls")
                .capabilities(capabilities.clone())
                .connect(&url)
                .await;
            match connected {
                Ok(client) => break client,
                Err(error) => {
                    if let Ok(Some(status)) = child.try_wait() {
                        panic!(
                            "chromedriver exited ({status}); is it installed? scripts/setup.sh installs chromium-driver"
                        );
                    }
                    if Instant::now() > deadline {
                        let said = std::fs::read_to_string(&log).unwrap_or_default();
                        panic!("no WebDriver session after {START_TIMEOUT:?}: {error}\n{said}");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        Browser {
            client,
            child,
            stdin,
            _profile: profile,
        }
    }

    /// Opens `url`.
    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
    }

    /// The text of the first element matching `css`, if there is one.
    pub async fn text(&self, css: &str) -> Option<String> {
        self.read(css, |element| async move { element.text().await })
            .await
    }

    /// Attribute `name` of the first element matching `css`, if both are there.
    pub async fn attribute(&self, css: &str, name: &str) -> Option<String> {
        self.read(css, |element| async move { element.attr(name).await })
            .await
            .flatten()
    }

    /// Reads the first element matching `css` with `read`, if there is one.
    /// A live page may replace the element between finding and reading it
    /// (the read fails as a stale element); then it is found again.
    async fn read<T, F, Fut>(&self, css: &str, read: F) -> Option<T>
    where
        F: Fn(Element) -> Fut,
        Fut: Future<Output = Result<T, CmdError>>,
    {
        for _ in 0..STALE_RETRIES {
            let element = self.client.find(Locator::Css(css)).await.ok()?;
            match read(element).await {
                Ok(value) => return Some(value),
                Err(e) if e.is_stale_element_reference() => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(_) => return None,
            }
        }
        None
    }

    /// Polls (every 50 ms) until the text of `css` satisfies `ok`, and
    /// returns how long it took; panics with the last text after `within`.
    pub async fn wait_text(
        &self,
        css: &str,
        within: Duration,
        ok: impl Fn(&str) -> bool,
    ) -> Duration {
        let started = Instant::now();
        loop {
            let text = self.text(css).await;
            if text.as_deref().is_some_and(&ok) {
                return started.elapsed();
            }
            if started.elapsed() > within {
                panic!("{css}: after {within:?} its text is {text:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Clicks the first element matching `css`, waiting up to 10 s for it.
    /// A live page may replace the element between finding and clicking
    /// it; then it is found again.
    pub async fn click(&self, css: &str) {
        for _ in 0..STALE_RETRIES {
            let element = self
                .client
                .wait()
                .at_most(Duration::from_secs(10))
                .for_element(Locator::Css(css))
                .await
                .unwrap_or_else(|e| panic!("{css}: {e}"));
            match element.click().await {
                Ok(()) => return,
                Err(e) if e.is_stale_element_reference() => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("clicking {css}: {e}"),
            }
        }
        panic!("clicking {css}: the page kept replacing it");
    }

    /// Types `text` into the first element matching `css`.
    pub async fn type_into(&self, css: &str, text: &str) {
        let element = self
            .client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"));
        element
            .send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("typing into {css}: {e}"));
    }

    /// The page as the browser has it now (after its scripts ran).
    pub async fn html(&self) -> String {
        self.client.source().await.expect("the page source")
    }

    /// The current URL.
    pub async fn url(&self) -> String {
        self.client
            .current_url()
            .await
            .expect("the URL")
            .to_string()
    }

    /// Saves a screenshot as `NAME.png` under the build's
    /// `test-artifacts/dashboard/` and returns its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("a screenshot");
        let dir = artifacts_dir().join("dashboard");
        std::fs::create_dir_all(&dir).expect("the artefacts directory");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("the screenshot is written");
        path
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// `$CARGO_TARGET_DIR/test-artifacts` (or `target/test-artifacts` in the
/// repository).
pub fn artifacts_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::repo_root().join("target"));
    target.join("test-artifacts")
}
