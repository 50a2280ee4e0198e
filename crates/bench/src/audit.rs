//! Counting one user's API requests, by verb, resource and the user they
//! were made as, from the API server's audit log (JSON lines, one event per
//! stage of each request).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// One kind of request: "patch configmaps", or "patch configmaps as
/// system:serviceaccount:ns:deployer" when made impersonating.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    pub verb: String,
    pub resource: String,
    /// The user impersonated (`Impersonate-User`), if any: the audit log
    /// keeps the requester as `user` and this as `impersonatedUser`.
    pub as_user: Option<String>,
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.verb, self.resource)?;
        match &self.as_user {
            Some(user) => write!(f, " as {user}"),
            None => Ok(()),
        }
    }
}

/// Requests counted by [`Request`].
#[derive(Debug, Default, Clone)]
pub struct Counts(pub BTreeMap<Request, u64>);

impl Counts {
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// The requests other than watches and the leader Lease's renewals
    /// (the lease manager reads and patches its Lease every few seconds).
    pub fn beyond_watches_and_lease(&self) -> Counts {
        self.only(|r| r.verb != "watch" && r.resource != "leases")
    }

    /// The requests made impersonating someone.
    pub fn impersonated(&self) -> Counts {
        self.only(|r| r.as_user.is_some())
    }

    /// How many users the requests were made as, impersonating.
    pub fn impersonated_users(&self) -> usize {
        let users: BTreeSet<&String> = self.0.keys().filter_map(|r| r.as_user.as_ref()).collect();
        users.len()
    }

    /// Writes of Events (core or events.k8s.io: both are `events`).
    pub fn event_writes(&self) -> u64 {
        self.only(|r| {
            r.resource == "events" && ["create", "patch", "update"].contains(&r.verb.as_str())
        })
        .total()
    }

    /// These counts and `other`'s, added up.
    pub fn plus(&self, other: &Counts) -> Counts {
        let mut sum = self.clone();
        for (request, n) in &other.0 {
            *sum.0.entry(request.clone()).or_default() += n;
        }
        sum
    }

    /// `verb resource [as user]=n, …` on one line.
    pub fn line(&self) -> String {
        if self.0.is_empty() {
            return "none".into();
        }
        self.0
            .iter()
            .map(|(request, n)| format!("{request}={n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn only(&self, keep: impl Fn(&Request) -> bool) -> Counts {
        Counts(
            self.0
                .iter()
                .filter(|(request, _)| keep(request))
                .map(|(request, n)| (request.clone(), *n))
                .collect(),
        )
    }
}

/// Waits `length` and returns the window `[from, to)` waited through, to
/// count the requests made in it.
pub async fn window(length: Duration) -> (Timestamp, Timestamp) {
    let from = Timestamp::now();
    tokio::time::sleep(length).await;
    (from, Timestamp::now())
}

/// Counts requests by `user` received in `[from, to)`. Waits (up to a
/// minute) until the log holds an event received after `to`, as the API
/// server writes its audit log in batches.
pub async fn count(log: &Path, user: &str, from: Timestamp, to: Timestamp) -> Counts {
    let [counts] = count_windows(log, user, [(from, to)]).await;
    counts
}

/// [`count`] for several windows `[from, to)` at once, reading the log
/// (which grows large over a long benchmark) once: one [`Counts`] per
/// window, in their order.
pub async fn count_windows<const N: usize>(
    log: &Path,
    user: &str,
    windows: [(Timestamp, Timestamp); N],
) -> [Counts; N] {
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
    let mut counts: [Counts; N] = std::array::from_fn(|_| Counts::default());
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
        let request = Request {
            verb: event["verb"].as_str().unwrap_or("?").to_string(),
            resource: event
                .pointer("/objectRef/resource")
                .and_then(Value::as_str)
                .or_else(|| event["requestURI"].as_str())
                .unwrap_or("?")
                .to_string(),
            as_user: event
                .pointer("/impersonatedUser/username")
                .and_then(Value::as_str)
                .map(str::to_string),
        };
        *counts[window].0.entry(request).or_default() += 1;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One audit event (stage ResponseComplete) of `user`, `as_user` when
    /// impersonating, received at second `second` of the minute.
    fn event(
        id: &str,
        user: &str,
        as_user: Option<&str>,
        verb: &str,
        resource: &str,
        second: u32,
    ) -> String {
        let mut event = serde_json::json!({
            "auditID": id, "stage": "ResponseComplete", "verb": verb,
            "user": {"username": user},
            "objectRef": {"resource": resource},
            "requestReceivedTimestamp": format!("2025-01-01T00:00:{second:02}.000000Z"),
        });
        if let Some(as_user) = as_user {
            event["impersonatedUser"] = serde_json::json!({"username": as_user});
        }
        event.to_string()
    }

    #[tokio::test]
    async fn requests_made_impersonating_are_counted_apart_by_the_user_they_were_made_as() {
        let deployer = "system:serviceaccount:team-a:deployer";
        let log =
            std::env::temp_dir().join(format!("tether-bench-audit-{}.log", std::process::id()));
        let lines = [
            event("1", "tether-a", None, "watch", "configmaps", 1),
            event("2", "tether-a", None, "patch", "leases", 2),
            event("3", "tether-a", Some(deployer), "patch", "configmaps", 3),
            // The same request's other stage: counted once.
            event("3", "tether-a", Some(deployer), "patch", "configmaps", 3),
            event("4", "tether-a", None, "patch", "configmaps", 4),
            event("5", "someone-else", None, "patch", "configmaps", 5),
            event("6", "tether-a", None, "patch", "configmaps", 30),
        ];
        std::fs::write(&log, lines.join("\n")).unwrap();
        let at = |second: u32| -> Timestamp {
            format!("2025-01-01T00:00:{second:02}Z").parse().unwrap()
        };
        let counts = count(&log, "tether-a", at(0), at(10)).await;
        std::fs::remove_file(&log).unwrap();

        assert_eq!(counts.total(), 4);
        let beyond = counts.beyond_watches_and_lease();
        assert_eq!(
            beyond.line(),
            format!("patch configmaps=1, patch configmaps as {deployer}=1")
        );
        assert_eq!(counts.impersonated().total(), 1);
        assert_eq!(counts.impersonated_users(), 1);
        assert_eq!(beyond.plus(&beyond).total(), 4);
    }
}
