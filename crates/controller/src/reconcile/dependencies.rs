//! `spec.dependsOn`: an app waits until the apps it names are Synced and
//! Healthy (the decision is `tether_core::dependency`); when an app's sync
//! or health changes, the apps waiting for it are woken at once.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use kube::runtime::reflector::Store;
use tether_core::dependency::{self, AppName, Known, Verdict};
use tether_core::health::HealthStatus;
use tether_core::state::SyncStatus;
use tokio::sync::mpsc::UnboundedSender;

use super::Pass;
use crate::api::{Application, StoredApplication};
use crate::context::Context;
use crate::observe::live::AppKey;
use crate::report::status::Step;

/// Whether `pass`'s app may go on; else the step and why not.
pub fn ready(pass: &Pass<'_>) -> Result<(), (Step, String)> {
    let spec = &pass.app.spec;
    if spec.depends_on.is_empty() {
        return Ok(());
    }
    let me = AppName::new(&pass.key.0, &pass.key.1);
    let depends_on = depends_on(&pass.key.0, &pass.app);
    let known = known(pass.ctx);
    match dependency::judge(&me, &depends_on, &known) {
        Verdict::Ready => Ok(()),
        waiting @ Verdict::Waiting(_) => Err((Step::Dependency, waiting.to_string())),
        cycle @ Verdict::Cycle(_) => Err((Step::DependencyCycle, cycle.to_string())),
    }
}

/// Wakes the apps that wait for an app whose sync or health changed, as
/// the Application watch delivers it (after the cache has it, so the
/// woken app reads the new status).
#[derive(Default)]
pub struct Waker {
    seen: Mutex<HashMap<AppKey, (SyncStatus, HealthStatus)>>,
}

impl Waker {
    /// `stored` arrived in `apps`: wake its dependents if it moved.
    pub fn arrived(
        &self,
        stored: &StoredApplication,
        apps: &Store<StoredApplication>,
        wake: &UnboundedSender<AppKey>,
    ) {
        let Ok(app) = &stored.decoded else { return };
        let key: AppKey = (
            stored.metadata.namespace.clone().unwrap_or_default(),
            stored.metadata.name.clone().unwrap_or_default(),
        );
        let status = app.status.clone().unwrap_or_default();
        let now = (status.sync.status, status.health.status);
        let before = self.seen.lock().expect("lock").insert(key.clone(), now);
        if before == Some(now) {
            return;
        }
        let changed = AppName::new(&key.0, &key.1);
        for other in apps.state() {
            let Ok(decoded) = &other.decoded else {
                continue;
            };
            let namespace = other.metadata.namespace.clone().unwrap_or_default();
            if depends_on(&namespace, decoded).contains(&changed) {
                let name = other.metadata.name.clone().unwrap_or_default();
                let _ = wake.send((namespace, name));
            }
        }
    }
}

/// The apps `app` (in `namespace`) depends on.
fn depends_on(namespace: &str, app: &Application) -> Vec<AppName> {
    app.spec
        .depends_on
        .iter()
        .map(|d| AppName::new(d.namespace.as_deref().unwrap_or(namespace), &d.name))
        .collect()
}

/// What the Application cache says of every app.
fn known(ctx: &Context) -> BTreeMap<AppName, Known> {
    ctx.apps
        .state()
        .iter()
        .filter_map(|stored| {
            let app = stored.decoded.as_ref().ok()?;
            let namespace = stored.metadata.namespace.clone()?;
            let name = stored.metadata.name.clone()?;
            let status = app.status.clone().unwrap_or_default();
            let known = Known {
                sync: status.sync.status,
                health: status.health.status,
                current: status.observed_generation == stored.metadata.generation,
                message: status.health.message.clone(),
                depends_on: depends_on(&namespace, app),
            };
            Some((AppName::new(&namespace, &name), known))
        })
        .collect()
}
