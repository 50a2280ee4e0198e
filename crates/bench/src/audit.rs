//! Counting one user's API requests, by verb and resource, from the API
//! server's audit log (JSON lines, one event per stage of each request).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// Requests counted by "verb resource" (e.g. "patch configmaps").
#[derive(Debug, Default)]
pub struct Counts(pub BTreeMap<String, u64>);

impl Counts {
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// Requests other than watches and the leader Lease's renewals (the
    /// lease manager reads and patches its Lease every few seconds).
    pub fn beyond_watches_and_lease(&self) -> u64 {
        self.0
            .iter()
            .filter(|(key, _)| !key.starts_with("watch ") && !is_lease_renewal(key))
            .map(|(_, n)| n)
            .sum()
    }

    /// Writes of Events (core or events.k8s.io: both are `events`).
    pub fn event_writes(&self) -> u64 {
        ["create", "patch", "update"]
            .iter()
            .filter_map(|verb| self.0.get(&format!("{verb} events")))
            .sum()
    }

    /// `verb resource=n, …` on one line.
    pub fn line(&self) -> String {
        if self.0.is_empty() {
            return "none".into();
        }
        self.0
            .iter()
            .map(|(key, n)| format!("{key}={n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn is_lease_renewal(key: &str) -> bool {
    key.ends_with(" leases")
}

/// Counts requests by `user` received in `[from, to)`. Waits (up to a
/// minute) until the log holds an event received after `to`, as the API
/// server writes its audit log in batches.
pub async fn count(log: &Path, user: &str, from: Timestamp, to: Timestamp) -> Counts {
    let mut counts = count_windows(log, user, &[(from, to)]).await;
    counts.pop().unwrap_or_default()
}

/// [`count`] for several windows `[from, to)` at once, reading the log
/// (which grows large over a long benchmark) once.
pub async fn count_windows(
    log: &Path,
    user: &str,
    windows: &[(Timestamp, Timestamp)],
) -> Vec<Counts> {
    let last = windows.iter().map(|(_, to)| *to).max();
    for _ in 0..60 {
        if latest(log)
            .zip(last)
            .is_some_and(|(latest, last)| latest > last)
        {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    // Most lines are other users'; skip them before parsing (the JSON
    // check below is the one that counts).
    let mention = format!("\"username\":\"{user}\"");
    let mut seen = HashSet::new();
    let mut counts: Vec<Counts> = windows.iter().map(|_| Counts::default()).collect();
    for event in text
        .lines()
        .filter(|l| l.contains(&mention))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        if event.pointer("/user/username").and_then(Value::as_str) != Some(user) {
            continue;
        }
        let Some(received) = received(&event) else {
            continue;
        };
        let Some(window) = windows
            .iter()
            .position(|(from, to)| *from <= received && received < *to)
        else {
            continue;
        };
        let id = event["auditID"].as_str().unwrap_or_default().to_string();
        if !seen.insert(id) {
            continue;
        }
        let verb = event["verb"].as_str().unwrap_or("?");
        let resource = event
            .pointer("/objectRef/resource")
            .and_then(Value::as_str)
            .or_else(|| event["requestURI"].as_str())
            .unwrap_or("?");
        *counts[window]
            .0
            .entry(format!("{verb} {resource}"))
            .or_default() += 1;
    }
    counts
}

fn received(event: &Value) -> Option<Timestamp> {
    event["requestReceivedTimestamp"].as_str()?.parse().ok()
}

fn latest(log: &Path) -> Option<Timestamp> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(log).ok()?;
    let length = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(length.saturating_sub(256 * 1024)))
        .ok()?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail).ok()?;
    String::from_utf8_lossy(&tail)
        .lines()
        .rev()
        .take(200)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| received(&e))
        .max()
}
