//! The BreakGlass windows' controller: a window is checked when it
//! changes and whenever one of its audit records does, by the replica
//! that reconciles its app.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use crate::api::BreakGlass;
use crate::break_glass::audit;
use crate::break_glass::lifecycle::{self, WindowContext};
use crate::context::Config;
use crate::shards::{self, Shards};

/// The windows' controller, not running yet (its cache is shared first).
/// A window is checked again whenever one of its audit records (in the
/// controller's namespace) is added, changed or removed.
pub(super) fn windows(
    client: &Client,
    api: Api<BreakGlass>,
    config: &Config,
) -> Controller<BreakGlass> {
    let audit_records: Api<ConfigMap> = Api::namespaced(client.clone(), &config.lease_namespace);
    Controller::new(api, watcher::Config::default()).watches(
        audit_records,
        watcher::Config::default().labels(audit::WINDOW_UID_LABEL),
        |record: ConfigMap| {
            let window = record
                .metadata
                .annotations?
                .remove(audit::WINDOW_ANNOTATION)?;
            let (namespace, name) = window.split_once('/')?;
            Some(ObjectRef::<BreakGlass>::new(name).within(namespace))
        },
    )
}

/// Runs the windows' controller; a window is kept by the replica that
/// reconciles its app.
pub(super) async fn keep(
    windows: Controller<BreakGlass>,
    sharded: Option<Shards>,
    context: Arc<WindowContext>,
) {
    windows
        .reconcile_all_on(shards::gained(&sharded))
        .run(
            move |window: Arc<BreakGlass>, ctx| {
                let namespace = window.metadata.namespace.clone().unwrap_or_default();
                let working = shards::working(&sharded, &namespace, &window.spec.application);
                async move {
                    match working {
                        Some(_working) => lifecycle::reconcile(window, ctx).await,
                        None => Ok(controller::Action::await_change()),
                    }
                }
            },
            lifecycle::error_policy,
            context,
        )
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "break-glass round");
            }
        })
        .await
}
