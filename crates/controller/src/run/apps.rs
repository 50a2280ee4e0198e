//! The Applications' controller: when an app is reconciled.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use crate::api::{BreakGlass, StoredApplication};
use crate::context::Context;
use crate::reconcile::{error_policy, reconcile};
use crate::shards::{self, Shards};

/// Runs the Applications' controller: an app is reconciled when it
/// changes, when `wakes` names it, when one of its break-glass `windows`
/// changes, when `everything` fires (all apps) and when its shard is
/// gained — by this replica only while it works that app's shard.
pub(super) async fn reconcile_apps(
    controller: Controller<StoredApplication>,
    wakes: impl Stream<Item = ObjectRef<StoredApplication>> + Send + 'static,
    windows: Api<BreakGlass>,
    everything: impl Stream<Item = ()> + Send + 'static,
    sharded: Option<Shards>,
    context: Arc<Context>,
) {
    controller
        .with_config(
            controller::Config::default()
                .concurrency(context.config.concurrency)
                .debounce(Duration::from_millis(20)),
        )
        .reconcile_on(wakes)
        // A window opening, expiring or closing changes what self-heal may do.
        .watches(windows, watcher::Config::default(), |window: BreakGlass| {
            let namespace = window.metadata.namespace.clone()?;
            Some(ObjectRef::<StoredApplication>::new(&window.spec.application).within(&namespace))
        })
        // Health rules or a Project changed: every app is judged again.
        .reconcile_all_on(everything)
        // A shard gained: its apps are reconciled at once.
        .reconcile_all_on(shards::gained(&sharded))
        .run(
            move |app: Arc<StoredApplication>, ctx| {
                let meta = &app.metadata;
                let namespace = meta.namespace.as_deref().unwrap_or_default();
                let name = meta.name.as_deref().unwrap_or_default();
                let working = shards::working(&sharded, namespace, name);
                async move {
                    match working {
                        Some(_working) => reconcile(app, ctx).await,
                        None => Ok(controller::Action::await_change()),
                    }
                }
            },
            error_policy,
            context,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile round");
            }
        })
        .await
}
