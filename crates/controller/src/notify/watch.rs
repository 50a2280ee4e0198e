//! Keeping the routes current: a watch of the routes ConfigMap (only that
//! one object) in the controller's namespace, so an edit applies without
//! a restart and costs no request when nothing changes.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;

use super::table::RouteTable;
use crate::watch_retry::Retrying;

/// Watches ConfigMap `name` in `namespace` and loads its routes into
/// `table` on every change (and its absence when it is deleted); runs
/// until dropped.
pub async fn watch_routes(
    client: kube::Client,
    namespace: &str,
    name: &str,
    table: Arc<RouteTable>,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let writer = reflector::store::Writer::default();
    let store: Store<ConfigMap> = writer.as_reader();
    let stream = reflector::reflector(writer, watcher(api, config).retrying());
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => {
                table.load(store.state().first().map(|configmap| configmap.as_ref()));
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "notification routes watch interrupted; retrying")
            }
        }
    }
}
