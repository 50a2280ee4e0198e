//! A real Prometheus (Debian's `prometheus` package, which
//! `scripts/setup.sh` installs) on a loopback port: it scrapes the targets
//! a test names, evaluates the test's rule files, and answers queries over
//! its HTTP API. It stops when dropped, or when the test process ends
//! however it ends.
//!
//! A scrape token is written to a file of mode 0600 in Prometheus' own
//! temporary directory and referenced by path, so it never appears in the
//! configuration, a log line or a panic message.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::daemon::free_port;

/// How long Prometheus may take to answer `/-/ready`.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs Prometheus in the background and kills it when its standard input
/// closes: when [`Prometheus`] is dropped, or when the kernel closes the
/// pipe because the test process ended (even by SIGKILL). The shell exits
/// with Prometheus' status, so a Prometheus that stops by itself is seen.
/// (A background job's stdin is /dev/null before its own redirections, so
/// the pipe is handed to the watcher as fd 3.)
const WATCHDOG: &str = r#"
exec 3<&0
prometheus "$@" 3<&- &
pid=$!
(cat >/dev/null; kill -KILL "$pid" 2>/dev/null) <&3 3<&- &
exec 3<&-
wait "$pid"
"#;

/// One scrape target.
#[derive(Clone, Debug)]
pub struct Target {
    /// The `job` label; targets of one job share one scrape configuration
    /// (and so one token).
    pub job: String,
    /// `host:port` serving `/metrics` over plain HTTP.
    pub address: String,
    /// Sent as `Authorization: Bearer …` on every scrape.
    pub bearer_token: Option<String>,
}

/// An alert as `/api/v1/alerts` reports it.
#[derive(Clone, Debug)]
pub struct Alert {
    /// The rule's `alert:` name.
    pub name: String,
    pub state: AlertState,
    /// The alert's labels (without `alertname`).
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// Where an active alert stands: its expression holds, for less than
/// (pending) or at least (firing) its rule's `for:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AlertState {
    Pending,
    Firing,
}

/// A running Prometheus; killed when dropped.
pub struct Prometheus {
    child: Child,
    stdin: Option<ChildStdin>,
    url: String,
    http: reqwest::Client,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` and evaluating `rule_files`
    /// every `scrape_and_eval_interval`; returns once it is ready.
    pub async fn start(
        targets: &[Target],
        rule_files: &[PathBuf],
        scrape_and_eval_interval: Duration,
    ) -> Prometheus {
        let dir = tempfile::tempdir().expect("a directory for Prometheus");
        let config = dir.path().join("prometheus.json");
        let text = config_text(dir.path(), targets, rule_files, scrape_and_eval_interval);
        std::fs::write(&config, text).expect("writing Prometheus' configuration");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("a log file");
        let address = format!("127.0.0.1:{}", free_port());
        let mut child = Command::new("sh")
            .args(["-c", WATCHDOG, "prometheus"])
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={address}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("sh starts");
        let stdin = child.stdin.take();
        let mut prometheus = Prometheus {
            child,
            stdin,
            url: format!("http://{address}"),
            http: reqwest::Client::new(),
            dir,
        };
        prometheus.wait_until_ready().await;
        prometheus
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Prometheus' own log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// The `data.result` of an instant query (`/api/v1/query`) at the
    /// current time: a vector's samples, or a scalar's `[time, "value"]`.
    /// A query Prometheus refuses fails the test with its error.
    pub async fn query(&self, promql: &str) -> Value {
        let url = reqwest::Url::parse_with_params(
            &format!("{}/api/v1/query", self.url),
            [("query", promql)],
        )
        .expect("a valid URL");
        let mut body = self.get(url).await;
        assert_eq!(
            body["status"], "success",
            "Prometheus refused the query {promql}: {body}"
        );
        body["data"]["result"].take()
    }

    /// The pending and firing alerts (`/api/v1/alerts`).
    pub async fn alerts(&self) -> Vec<Alert> {
        let mut body = self.get(format!("{}/api/v1/alerts", self.url)).await;
        let alerts = body["data"]["alerts"].take();
        let alerts: Vec<Value> = serde_json::from_value(alerts).expect("a list of alerts");
        alerts.into_iter().map(alert).collect()
    }

    /// Alert `name` once it is in `state`; panics after `timeout` with the
    /// alerts last seen and Prometheus' log.
    pub async fn wait_for_alert(&self, name: &str, state: AlertState, timeout: Duration) -> Alert {
        let found = poll(
            timeout,
            || self.alerts(),
            |alerts: &Vec<Alert>| {
                alerts
                    .iter()
                    .find(|a| a.name == name && a.state == state)
                    .cloned()
            },
        )
        .await;
        found.unwrap_or_else(|last| {
            panic!(
                "alert {name} was not {state:?} within {timeout:?}; alerts: {last:#?}\nPrometheus' log:\n{}",
                self.log()
            )
        })
    }

    /// The result of `promql` once `check` holds for it; panics after
    /// `timeout` with the result last seen and Prometheus' log.
    pub async fn wait_for_query(
        &self,
        promql: &str,
        timeout: Duration,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let found = poll(
            timeout,
            || self.query(promql),
            |result: &Value| check(result).then(|| result.clone()),
        )
        .await;
        found.unwrap_or_else(|last| {
            panic!(
                "{promql} did not get there within {timeout:?}; last result: {last}\nPrometheus' log:\n{}",
                self.log()
            )
        })
    }

    async fn get(&self, url: impl reqwest::IntoUrl) -> Value {
        let response = self.http.get(url).send().await.expect("Prometheus answers");
        let text = response.text().await.expect("Prometheus' answer");
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("Prometheus answered {text}"))
    }

    async fn wait_until_ready(&mut self) {
        let ready = format!("{}/-/ready", self.url);
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("prometheus stopped ({status}):\n{}", self.log());
            }
            let answer = self.http.get(&ready).send().await;
            if answer.is_ok_and(|response| response.status().is_success()) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "prometheus was not ready within {START_TIMEOUT:?}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Asks `fetch` every 200 ms until `pick` finds what is waited for in its
/// answer; after `timeout`, the answer last seen.
async fn poll<T: Default, R, F: Future<Output = T>>(
    timeout: Duration,
    fetch: impl Fn() -> F,
    pick: impl Fn(&T) -> Option<R>,
) -> Result<R, T> {
    let mut last = T::default();
    let found = tokio::time::timeout(timeout, async {
        loop {
            last = fetch().await;
            if let Some(found) = pick(&last) {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    found.map_err(|_| last)
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // Closing the pipe is the signal; then reap the shell, which waits
        // for Prometheus.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// Prometheus' configuration as JSON (which is YAML), with each job's
/// token in a file of its own.
fn config_text(
    dir: &Path,
    targets: &[Target],
    rule_files: &[PathBuf],
    interval: Duration,
) -> String {
    let interval = format!("{}ms", interval.as_millis());
    let mut jobs: BTreeMap<&str, (Option<&str>, Vec<&str>)> = BTreeMap::new();
    for target in targets {
        let (token, addresses) = jobs.entry(&target.job).or_default();
        let wanted = target.bearer_token.as_deref();
        assert!(
            addresses.is_empty() || *token == wanted,
            "the targets of job {} must share one token",
            target.job
        );
        *token = wanted;
        addresses.push(&target.address);
    }
    let scrape_configs: Vec<Value> = jobs
        .into_iter()
        .enumerate()
        .map(|(index, (job, (token, addresses)))| {
            let mut config = json!({
                "job_name": job,
                "honor_labels": true,
                "static_configs": [{ "targets": addresses }],
            });
            if let Some(token) = token {
                let file = dir.join(format!("token-{index}"));
                write_secret(&file, token);
                config["authorization"] = json!({ "type": "Bearer", "credentials_file": file });
            }
            config
        })
        .collect();
    let rule_files: Vec<PathBuf> = rule_files
        .iter()
        .map(|file| std::path::absolute(file).expect("an absolute path"))
        .collect();
    json!({
        "global": {
            "scrape_interval": interval,
            "scrape_timeout": interval,
            "evaluation_interval": interval,
        },
        "rule_files": rule_files,
        "scrape_configs": scrape_configs,
    })
    .to_string()
}

/// Writes `secret` to a new file only its owner can read.
fn write_secret(path: &Path, secret: &str) {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(secret.as_bytes()))
        .unwrap_or_else(|error| panic!("writing {}: {error}", path.display()));
}

/// One entry of `/api/v1/alerts`: the name is the `alertname` label.
fn alert(mut entry: Value) -> Alert {
    let mut labels: BTreeMap<String, String> =
        serde_json::from_value(entry["labels"].take()).expect("labels");
    let name = labels.remove("alertname").expect("an alertname label");
    Alert {
        name,
        state: serde_json::from_value(entry["state"].take()).expect("pending or firing"),
        labels,
        annotations: serde_json::from_value(entry["annotations"].take()).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_scrape_token_is_only_in_a_file_its_owner_alone_can_read() {
        let dir = tempfile::tempdir().expect("a directory");
        let target = |address: &str| Target {
            job: "tether".into(),
            address: address.into(),
            bearer_token: Some("s3cret".into()),
        };
        let text = config_text(
            dir.path(),
            &[target("127.0.0.1:1"), target("127.0.0.1:2")],
            &[],
            Duration::from_millis(500),
        );
        assert!(!text.contains("s3cret"), "{text}");
        let config: Value = serde_json::from_str(&text).expect("JSON");
        let job = &config["scrape_configs"][0];
        assert_eq!(
            job["static_configs"][0]["targets"],
            json!(["127.0.0.1:1", "127.0.0.1:2"])
        );
        assert_eq!(config["global"]["scrape_interval"], "500ms");
        let file = job["authorization"]["credentials_file"]
            .as_str()
            .expect("a file");
        assert_eq!(std::fs::read_to_string(file).expect("the token"), "s3cret");
        let mode = std::fs::metadata(file)
            .expect("the file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
