//! Polling Git without a webhook: a cheap ref check per repository.
//!
//! Each Application is polled at its `spec.source.interval` (or
//! [`crate::Config::poll_interval`]); apps on one repository (read with the
//! same credentials) share one poll at the shortest of their intervals
//! ([`tether_core::poll`] decides which are due). A poll lists the remote's
//! refs as `git ls-remote` does — no objects are fetched — and wakes exactly
//! the apps whose revision now names another commit
//! ([`tether_source::git::moved`]); their reconcile does the fetch. The
//! first poll of a repository compares what it lists with the commit each
//! app last synced ([`tether_source::git::differs`]), so a commit pushed
//! between an app's first reconcile and that poll is not missed.
//!
//! A chart source's poll resolves its version again: one conditional read
//! of the Helm repository's index (answered `304` while nothing was
//! published, and shared by the apps of one repository), or the registry's
//! tags and manifest; an app wakes when its version or digest changed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::runtime::reflector::Store;
use tether_core::poll::{due, failing_delay, next_due, parse_interval, schedule};
use tether_source::git::{RemoteRefs, differs, moved, repo_key};
use tether_source::{Revision, Source};
use tokio::sync::mpsc;

use crate::api::StoredApplication;
use crate::context::Context;
use crate::observe::live::AppKey;

/// How often the Application cache is looked at again for apps, repositories
/// or intervals that changed, when no poll falls due sooner.
const RECHECK: Duration = Duration::from_secs(1);

/// What makes two apps' polls interchangeable: the repository, and the
/// Secret (namespace, name) it is read with, if any.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PollKey {
    pub repository: String,
    pub secret: Option<(String, String)>,
}

/// One app that follows a revision of a repository.
#[derive(Debug, Clone)]
pub struct Follower {
    pub key: PollKey,
    pub app: AppKey,
    pub revision: Revision,
    pub interval: Duration,
    pub source: Source,
    /// The commit the app last synced, for a single-source app.
    pub synced: Option<String>,
}

/// The apps to poll for, from the Application cache: those that decode and
/// whose revision parses (the others' reconcile reports why).
pub fn followers(apps: &[Arc<StoredApplication>], default: Duration) -> Vec<Follower> {
    apps.iter()
        .filter_map(|stored| stored.decoded.as_ref().ok())
        .flat_map(|app| {
            let namespace = app.namespace().unwrap_or_default();
            let name = app.name_any();
            let sources = app.spec.sources();
            let synced = match sources.len() {
                1 => app.status.as_ref().and_then(|s| s.sync.revision.clone()),
                _ => None,
            };
            sources.into_iter().filter_map(move |source| {
                Some(Follower {
                    key: PollKey {
                        repository: repo_key(&source.repo_url),
                        secret: source
                            .secret_ref
                            .as_ref()
                            .map(|secret| (namespace.clone(), secret.name.clone())),
                    },
                    app: (namespace.clone(), name.clone()),
                    revision: Revision::parse(&source.revision).ok()?,
                    interval: source
                        .interval
                        .as_deref()
                        .and_then(|text| parse_interval(text).ok())
                        .unwrap_or(default),
                    source: source.clone(),
                    synced: synced.clone(),
                })
            })
        })
        .collect()
}

/// Polls every followed repository when due, until the controller stops,
/// sending the apps whose revision moved to `wake`.
pub async fn poll(
    ctx: Arc<Context>,
    apps: Store<StoredApplication>,
    wake: mpsc::UnboundedSender<AppKey>,
) {
    let mut polls = Polls::default();
    loop {
        let followers = followers(&apps.state(), ctx.config.poll_interval);
        let schedule = schedule(followers.iter().map(|f| (f.key.clone(), f.interval)));
        polls.keep_only(&schedule, &followers);
        let now = Instant::now();
        let (charts, repositories): (Vec<&PollKey>, Vec<&PollKey>) =
            due(&schedule, &polls.polled, now)
                .into_iter()
                .partition(|key| {
                    followers
                        .iter()
                        .any(|f| f.key == **key && f.source.is_package())
                });
        for key in charts {
            polls.polled.insert(key.clone(), now);
            for follower in followers.iter().filter(|f| f.key == *key) {
                if let Some(charted) = resolve_chart(&ctx, follower).await {
                    polls.charted(follower, charted, &wake);
                }
            }
        }
        let listings = repositories.into_iter().map(|key| {
            let follower = followers.iter().find(|f| f.key == *key).expect("scheduled");
            list_refs(&ctx, follower)
        });
        for (key, refs) in futures::future::join_all(listings).await {
            let following = followers.iter().filter(|f| f.key == key);
            match refs {
                Some(refs) => polls.listed(&key, refs, following, now, &wake),
                None => {
                    let interval = schedule.get(&key).copied().unwrap_or_default();
                    // The repository just stopped answering: its apps
                    // reconcile now, so their status says so (their own
                    // retries back off).
                    if polls.failed(&key, interval, now) {
                        for follower in following {
                            let _ = wake.send(follower.app.clone());
                        }
                    }
                }
            }
        }
        let recheck = Instant::now() + RECHECK;
        let next =
            next_due(&schedule, &polls.polled, Instant::now()).map_or(recheck, |n| n.min(recheck));
        // Each app's source, copied: not held while waiting (the next round
        // reads the cache again).
        drop(followers);
        tokio::time::sleep_until(next.into()).await;
    }
}

/// What the poller remembers between rounds.
#[derive(Default)]
struct Polls {
    /// When each repository was polled last (or, failing, when it is
    /// next due).
    polled: BTreeMap<PollKey, Instant>,
    /// Each repository's refs at its last listing.
    listed: HashMap<PollKey, RemoteRefs>,
    /// Each app's chart as last resolved, by repository and chart name.
    charted: HashMap<(AppKey, String, String), Charted>,
    /// Consecutive failed polls per repository: a failing one is polled
    /// less often (see `failing_delay`).
    failing: HashMap<PollKey, u32>,
}

impl Polls {
    /// Forgets the repositories and apps no longer followed.
    fn keep_only(&mut self, schedule: &BTreeMap<PollKey, Duration>, followers: &[Follower]) {
        self.polled.retain(|key, _| schedule.contains_key(key));
        self.listed.retain(|key, _| schedule.contains_key(key));
        self.failing.retain(|key, _| schedule.contains_key(key));
        self.charted
            .retain(|(app, ..), _| followers.iter().any(|f| f.app == *app));
    }

    /// Records `follower`'s chart as resolved now; wakes its app when the
    /// version or digest moved since the last time.
    fn charted(
        &mut self,
        follower: &Follower,
        now_charted: Charted,
        wake: &mpsc::UnboundedSender<AppKey>,
    ) {
        let chart = (
            follower.app.clone(),
            follower.source.repo_url.clone(),
            follower.source.chart.clone(),
        );
        let before = self.charted.insert(chart, now_charted.clone());
        if before.is_some_and(|before| before != now_charted) {
            tracing::info!(app = %format!("{}/{}", follower.app.0, follower.app.1),
                chart = %follower.source.chart, version = %now_charted.0,
                "a new chart version; waking the app");
            let _ = wake.send(follower.app.clone());
        }
    }

    /// Records repository `key`'s refs as listed now; wakes each app
    /// `following` it whose revision moved.
    fn listed<'a>(
        &mut self,
        key: &PollKey,
        refs: RemoteRefs,
        following: impl Iterator<Item = &'a Follower>,
        now: Instant,
        wake: &mpsc::UnboundedSender<AppKey>,
    ) {
        self.failing.remove(key);
        self.polled.insert(key.clone(), now);
        let before = self.listed.insert(key.clone(), refs.clone());
        for follower in following {
            // A first listing has nothing before it: it is compared with
            // what the app last synced, so a commit pushed between the
            // app's first reconcile and this listing is not missed.
            let moved = match (&before, &follower.synced) {
                (Some(before), _) => moved(before, &refs, &follower.revision),
                (None, Some(synced)) => differs(&refs, &follower.revision, synced),
                (None, None) => false,
            };
            if moved {
                tracing::info!(app = %format!("{}/{}", follower.app.0, follower.app.1),
                    revision = %follower.source.revision, "the revision moved; waking the app");
                let _ = wake.send(follower.app.clone());
            }
        }
    }

    /// Records that repository `key` did not answer: it is polled again
    /// later the more often it failed. Whether it just stopped answering.
    fn failed(&mut self, key: &PollKey, interval: Duration, now: Instant) -> bool {
        let failures = self.failing.entry(key.clone()).or_default();
        *failures += 1;
        self.polled
            .insert(key.clone(), now + failing_delay(interval, *failures));
        *failures == 1
    }
}

/// A chart's or OCI artifact's resolved version and digest.
type Charted = (String, String);

/// Resolves `follower`'s chart with its credentials (`None` when that
/// fails: the next poll tries again, and the app's reconcile reports it).
async fn resolve_chart(ctx: &Context, follower: &Follower) -> Option<Charted> {
    let source = follower.source.clone();
    if source.secret_ref.is_some() && !ctx.secrets_ready.wait().await {
        return None;
    }
    let credentials = crate::credentials::for_source(&ctx.secrets, &follower.app.0, &source)
        .inspect_err(|error| tracing::debug!(%error, "polling: no credentials"))
        .ok()?;
    let repositories = ctx.repositories.clone();
    let resolved = tokio::task::spawn_blocking(move || {
        repositories.resolve_package(&source, credentials.as_ref())
    })
    .await;
    match resolved {
        Ok(Ok(resolved)) => Some((resolved.version, resolved.digest)),
        Ok(Err(error)) => {
            tracing::debug!(%error, "polling failed; trying again at the next interval");
            None
        }
        Err(error) => {
            tracing::warn!(%error, "polling task failed");
            None
        }
    }
}

/// Lists `follower`'s repository with its credentials (`None` when that
/// fails: the next poll tries again, and the app's reconcile reports it).
async fn list_refs(ctx: &Context, follower: &Follower) -> (PollKey, Option<RemoteRefs>) {
    let key = follower.key.clone();
    let source = follower.source.clone();
    if source.secret_ref.is_some() && !ctx.secrets_ready.wait().await {
        return (key, None);
    }
    let credentials = match crate::credentials::for_source(&ctx.secrets, &follower.app.0, &source) {
        Ok(credentials) => credentials,
        Err(error) => {
            tracing::debug!(%error, "polling: no credentials");
            return (key, None);
        }
    };
    let repositories = ctx.repositories.clone();
    let listed = tokio::task::spawn_blocking(move || {
        repositories.list_refs(&source.repo_url, credentials.as_ref())
    })
    .await;
    match listed {
        Ok(Ok(refs)) => (key, Some(refs)),
        Ok(Err(error)) => {
            tracing::debug!(%error, "polling failed; trying again at the next interval");
            (key, None)
        }
        Err(error) => {
            tracing::warn!(%error, "polling task failed");
            (key, None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(name: &str, repo_url: &str, extra: serde_json::Value) -> Arc<StoredApplication> {
        let mut source = json!({"repoURL": repo_url, "path": name});
        source
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        Arc::new(StoredApplication::decode(&json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"source": source, "destination": {"namespace": "shop"}}
        })))
    }

    #[test]
    fn apps_on_one_repository_are_polled_once_at_their_shortest_interval() {
        let apps = [
            stored(
                "web",
                "https://git.example.com/shop.git",
                json!({"interval": "10s"}),
            ),
            stored("api", "git@git.example.com:shop", json!({})),
            stored("blog", "https://git.example.com/blog.git", json!({})),
            stored(
                "bad",
                "https://git.example.com/shop.git",
                json!({"revision": ">=x"}),
            ),
        ];
        let followers = followers(&apps, Duration::from_secs(180));
        assert_eq!(
            followers.len(),
            3,
            "an app whose revision does not parse is left out"
        );
        let schedule = schedule(followers.iter().map(|f| (f.key.clone(), f.interval)));
        let intervals: Vec<u64> = schedule.values().map(Duration::as_secs).collect();
        assert_eq!(intervals, [180, 10], "blog, then shop");
    }

    #[test]
    fn apps_reading_a_repository_with_other_credentials_poll_on_their_own() {
        let secret = json!({"secretRef": {"name": "deploy-key"}});
        let apps = [
            stored("web", "https://git.example.com/shop.git", json!({})),
            stored("api", "https://git.example.com/shop.git", secret),
        ];
        let followers = followers(&apps, Duration::from_secs(180));
        assert_ne!(followers[0].key, followers[1].key);
    }
}
