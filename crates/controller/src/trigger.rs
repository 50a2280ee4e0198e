//! Waking Applications early, as a Git webhook does.
//!
//! A push only *triggers* a reconcile: the fetch in the loop decides what
//! changed, so a trigger can cost no more than a poll. A [`Trigger`] is made
//! before the controller runs and handed to [`crate::run::run_with`]; it is
//! wired to the controller's Application cache and wake channel once this
//! replica leads. Until then (or on a replica that does not lead) it wakes
//! nothing, which is right: only the leader reconciles.

use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::reflector::Store;
use tether_source::git::repo_key;
use tokio::sync::mpsc;

use crate::api::Application;
use crate::live::AppKey;

/// A handle that wakes every Application using a repository.
#[derive(Clone, Default)]
pub struct Trigger {
    wiring: Arc<Mutex<Option<Wiring>>>,
}

struct Wiring {
    apps: Store<Application>,
    wake: mpsc::UnboundedSender<AppKey>,
}

impl Trigger {
    /// Wires the trigger to the controller's Application cache and wake
    /// channel (done by the controller once it leads).
    pub fn wire(&self, apps: Store<Application>, wake: mpsc::UnboundedSender<AppKey>) {
        *self.wiring.lock().expect("lock") = Some(Wiring { apps, wake });
    }

    /// Wakes every Application whose source is any of `repo_urls` (compared
    /// as [`repo_key`]s, so `https://…/x.git` and `git@…:x` are one
    /// repository). Returns how many were woken; 0 before this replica leads.
    pub fn repository<S: AsRef<str>>(&self, repo_urls: &[S]) -> usize {
        let keys: Vec<String> = repo_urls.iter().map(|u| repo_key(u.as_ref())).collect();
        let wiring = self.wiring.lock().expect("lock");
        let Some(wiring) = wiring.as_ref() else {
            return 0;
        };
        let mut woken = 0;
        for app in wiring.apps.state() {
            if keys.contains(&repo_key(&app.spec.source.repo_url)) {
                let key = (app.namespace().unwrap_or_default(), app.name_any());
                if wiring.wake.send(key).is_ok() {
                    woken += 1;
                }
            }
        }
        woken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;
    use serde_json::json;

    pub(crate) fn app(namespace: &str, name: &str, repo_url: &str) -> Application {
        serde_json::from_value(json!({
            "apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"source": {"repoURL": repo_url, "path": "app"},
                     "destination": {"namespace": namespace}}
        }))
        .unwrap()
    }

    #[test]
    fn a_trigger_wakes_every_app_of_the_repository_in_any_url_form_and_no_other() {
        let mut writer = Writer::<Application>::default();
        for app in [
            app("shop", "web", "https://git.example.com/shop/site.git"),
            app("shop", "api", "git@git.example.com:shop/site"),
            app("blog", "web", "https://git.example.com/blog/site.git"),
        ] {
            writer.apply_watcher_event(&watcher::Event::Apply(app));
        }
        let trigger = Trigger::default();
        assert_eq!(
            trigger.repository(&["https://git.example.com/shop/site"]),
            0
        );

        let (wake, mut woken) = mpsc::unbounded_channel();
        trigger.wire(writer.as_reader(), wake);
        assert_eq!(
            trigger.repository(&["https://git.example.com/shop/site"]),
            2
        );
        let mut names = vec![woken.try_recv().unwrap(), woken.try_recv().unwrap()];
        names.sort();
        assert_eq!(
            names,
            [("shop".into(), "api".into()), ("shop".into(), "web".into())]
        );
        assert!(woken.try_recv().is_err());
    }
}
