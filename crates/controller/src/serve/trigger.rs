//! Waking Applications early, as a Git webhook does.
//!
//! A push only *triggers* a reconcile: the fetch in the loop decides what
//! changed, so a trigger can cost no more than a poll. A [`Trigger`] is made
//! before the controller runs and handed to [`crate::run::run_with`]; it is
//! wired to the controller's Application cache and wake channel once this
//! replica leads. Until then (or on a replica that does not lead) it wakes
//! nothing, which is right: only the leader reconciles.
//!
//! When the push lists the paths it changed, the apps it can affect (see
//! [`tether_source::Source::affected_by`]) are woken at once and the other
//! apps of the repository [`UNAFFECTED_DELAY`] later, only to record the new
//! commit. In a monorepo of 200 apps, the one app a commit changed no
//! longer waits behind 199 that have nothing to do.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::reflector::Store;
use tether_source::git::repo_key;
use tokio::sync::mpsc;

use crate::api::StoredApplication;
use crate::observe::live::AppKey;

/// How long apps a push cannot affect wait before they are woken.
pub const UNAFFECTED_DELAY: Duration = Duration::from_secs(2);

/// A handle that wakes every Application using a repository.
#[derive(Clone, Default)]
pub struct Trigger {
    wiring: Arc<Mutex<Option<Wiring>>>,
}

struct Wiring {
    apps: Store<StoredApplication>,
    wake: mpsc::UnboundedSender<AppKey>,
}

/// The apps a push woke: at once, and after [`UNAFFECTED_DELAY`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Woken {
    pub now: usize,
    pub later: usize,
}

impl Trigger {
    /// Wires the trigger to the controller's Application cache and wake
    /// channel (done by the controller once it leads).
    pub fn wire(&self, apps: Store<StoredApplication>, wake: mpsc::UnboundedSender<AppKey>) {
        *self.wiring.lock().expect("lock") = Some(Wiring { apps, wake });
    }

    /// Wakes every Application whose source is any of `repo_urls` (compared
    /// as [`repo_key`]s, so `https://…/x.git` and `git@…:x` are one
    /// repository): at once if `changed_paths` is unknown or may affect it,
    /// else after [`UNAFFECTED_DELAY`]. Wakes nothing before this replica
    /// leads.
    pub fn repository<S: AsRef<str>>(
        &self,
        repo_urls: &[S],
        changed_paths: Option<&[String]>,
    ) -> Woken {
        let keys: Vec<String> = repo_urls.iter().map(|u| repo_key(u.as_ref())).collect();
        let wiring = self.wiring.lock().expect("lock");
        let Some(wiring) = wiring.as_ref() else {
            return Woken::default();
        };
        let (mut now, mut later) = (Vec::new(), Vec::new());
        let stored = wiring.apps.state();
        for app in stored
            .iter()
            .filter_map(|stored| stored.decoded.as_ref().ok())
        {
            let pushed: Vec<_> = app
                .spec
                .sources()
                .into_iter()
                .filter(|source| keys.contains(&repo_key(&source.repo_url)))
                .collect();
            if pushed.is_empty() {
                continue;
            }
            let key = (app.namespace().unwrap_or_default(), app.name_any());
            // A source that only lends files may lend any of them.
            let affected = |paths: &[String]| {
                pushed
                    .iter()
                    .any(|source| !source.renders() || source.affected_by(paths))
            };
            match changed_paths {
                Some(paths) if !affected(paths) => later.push(key),
                _ => now.push(key),
            }
        }
        let woken = Woken {
            now: now.len(),
            later: later.len(),
        };
        for key in now {
            let _ = wiring.wake.send(key);
        }
        let wake = wiring.wake.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if !later.is_empty() => {
                runtime.spawn(async move {
                    tokio::time::sleep(UNAFFECTED_DELAY).await;
                    for key in later {
                        let _ = wake.send(key);
                    }
                });
            }
            _ => later.into_iter().for_each(|key| {
                let _ = wake.send(key);
            }),
        }
        woken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Application;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;
    use serde_json::json;

    pub(crate) fn app(namespace: &str, name: &str, repo_url: &str) -> Application {
        serde_json::from_value(app_json(namespace, name, repo_url)).unwrap()
    }

    fn stored(app: &Application) -> StoredApplication {
        StoredApplication::decode(&serde_json::to_value(app).unwrap())
    }

    fn app_json(namespace: &str, name: &str, repo_url: &str) -> serde_json::Value {
        json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"source": {"repoURL": repo_url, "path": "app"},
                     "destination": {"namespace": namespace}}
        })
    }

    #[test]
    fn an_app_that_does_not_decode_is_never_woken() {
        let mut writer = Writer::<StoredApplication>::default();
        let mut bad = app_json("shop", "bad", "https://git.example.com/shop/site.git");
        bad["spec"]["source"]["path"] = json!(7);
        writer.apply_watcher_event(&watcher::Event::Apply(StoredApplication::decode(&bad)));
        let trigger = Trigger::default();
        let (wake, _woken) = mpsc::unbounded_channel();
        trigger.wire(writer.as_reader(), wake);
        let shop = ["https://git.example.com/shop/site"];
        assert_eq!(trigger.repository(&shop, None), Woken::default());
    }

    #[test]
    fn a_trigger_wakes_every_app_of_the_repository_in_any_url_form_and_no_other() {
        let mut writer = Writer::<StoredApplication>::default();
        for app in [
            app("shop", "web", "https://git.example.com/shop/site.git"),
            app("shop", "api", "git@git.example.com:shop/site"),
            app("blog", "web", "https://git.example.com/blog/site.git"),
        ] {
            writer.apply_watcher_event(&watcher::Event::Apply(stored(&app)));
        }
        let trigger = Trigger::default();
        let shop = ["https://git.example.com/shop/site"];
        assert_eq!(trigger.repository(&shop, None), Woken::default());

        let (wake, mut woken) = mpsc::unbounded_channel();
        trigger.wire(writer.as_reader(), wake);
        assert_eq!(trigger.repository(&shop, None), Woken { now: 2, later: 0 });
        let mut names = vec![woken.try_recv().unwrap(), woken.try_recv().unwrap()];
        names.sort();
        assert_eq!(
            names,
            [("shop".into(), "api".into()), ("shop".into(), "web".into())]
        );
        assert!(woken.try_recv().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn apps_a_push_cannot_affect_are_woken_later() {
        let mut writer = Writer::<StoredApplication>::default();
        for (name, path) in [("web", "apps/web"), ("api", "apps/api")] {
            let mut app = app("shop", name, "https://git.example.com/shop/site.git");
            app.spec.source.path = path.into();
            writer.apply_watcher_event(&watcher::Event::Apply(stored(&app)));
        }
        let trigger = Trigger::default();
        let (wake, mut woken) = mpsc::unbounded_channel();
        trigger.wire(writer.as_reader(), wake);

        let changed = ["apps/web/deploy.yaml".to_string()];
        let shop = ["https://git.example.com/shop/site"];
        assert_eq!(
            trigger.repository(&shop, Some(&changed)),
            Woken { now: 1, later: 1 }
        );
        assert_eq!(woken.try_recv().unwrap(), ("shop".into(), "web".into()));
        assert!(woken.try_recv().is_err());
        tokio::time::sleep(UNAFFECTED_DELAY).await;
        assert_eq!(woken.recv().await.unwrap(), ("shop".into(), "api".into()));
    }
}
