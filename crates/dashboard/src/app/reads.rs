//! What an app's page reads beyond the cache, as the user: the live
//! children of its workloads (ReplicaSets, Pods, Jobs of their
//! namespaces) and the Application's Events. A read the user may not make
//! is said on the page, not hidden. Reads are remembered for
//! [`FRESH_FOR`] per user and app, so a burst of changes costs the API
//! server at most one round of lists a second per open app.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tether_controller::api::Application;

use super::view::{Owned, has_children};
use crate::user::User;

/// How long a read is reused.
pub const FRESH_FOR: Duration = Duration::from_secs(1);

/// The live reads of one app's page.
#[derive(Default)]
pub struct Live {
    /// The live children of each namespace the app's workloads are in.
    pub owned: HashMap<String, Owned>,
    /// The Application's Events, newest first.
    pub events: Vec<Event>,
    /// Reads that failed (forbidden, …), each in a sentence.
    pub unread: Vec<String>,
}

type Memo = Mutex<HashMap<(String, String, String), (Instant, Arc<Live>)>>;

fn memo() -> &'static Memo {
    static MEMO: OnceLock<Memo> = OnceLock::new();
    MEMO.get_or_init(Default::default)
}

/// The live reads of `app`'s page as `user`, reused within [`FRESH_FOR`].
pub async fn live(user: &User, app: &Application) -> Arc<Live> {
    let key = (
        user.name.clone(),
        app.metadata.namespace.clone().unwrap_or_default(),
        app.metadata.name.clone().unwrap_or_default(),
    );
    if let Some((at, live)) = memo().lock().unwrap().get(&key)
        && at.elapsed() < FRESH_FOR
    {
        return live.clone();
    }
    let live = Arc::new(read(user, app).await);
    let mut kept = memo().lock().unwrap();
    kept.retain(|_, (at, _)| at.elapsed() < 10 * FRESH_FOR);
    kept.insert(key, (Instant::now(), live.clone()));
    live
}

async fn read(user: &User, app: &Application) -> Live {
    let mut live = Live::default();
    let namespaces: BTreeSet<String> = app
        .status
        .iter()
        .flat_map(|status| &status.resources)
        .filter(|resource| has_children(&resource.kind))
        .filter_map(|resource| resource.namespace.clone())
        .collect();
    for namespace in namespaces {
        let mut objects = Vec::new();
        objects.extend(list::<ReplicaSet>(user, &namespace, "ReplicaSets", &mut live.unread).await);
        objects.extend(list::<Pod>(user, &namespace, "Pods", &mut live.unread).await);
        objects.extend(list::<Job>(user, &namespace, "Jobs", &mut live.unread).await);
        live.owned.insert(namespace, Owned::of(objects));
    }
    let namespace = app.metadata.namespace.as_deref().unwrap_or_default();
    let name = app.metadata.name.as_deref().unwrap_or_default();
    let events: Api<Event> = Api::namespaced(user.client.clone(), namespace);
    let selector = format!("involvedObject.kind=Application,involvedObject.name={name}");
    match events.list(&ListParams::default().fields(&selector)).await {
        Ok(list) => {
            let mut events = list.items;
            events.sort_by_key(|event| std::cmp::Reverse(last_seen(event)));
            events.truncate(50);
            live.events = events;
        }
        Err(error) => live
            .unread
            .push(format!("Events in namespace {namespace}: {}", said(&error))),
    }
    live
}

/// The objects of kind `K` in `namespace` as JSON (with kind set, which a
/// typed list leaves out), or none and a sentence in `unread`.
async fn list<K>(user: &User, namespace: &str, what: &str, unread: &mut Vec<String>) -> Vec<Value>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(user.client.clone(), namespace);
    match api.list(&ListParams::default()).await {
        Ok(list) => list
            .items
            .iter()
            .filter_map(|item| serde_json::to_value(item).ok())
            .map(|mut value| {
                value["kind"] = Value::String(K::kind(&()).to_string());
                value
            })
            .collect(),
        Err(error) => {
            unread.push(format!("{what} in namespace {namespace}: {}", said(&error)));
            Vec::new()
        }
    }
}

/// An API error in words: the API server's own message when it gave one.
fn said(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// When an Event was last seen: its series, its last timestamp, or its
/// event time (events.k8s.io writes the latter).
pub fn last_seen(event: &Event) -> String {
    event
        .series
        .as_ref()
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0.to_string())
        .or_else(|| event.last_timestamp.as_ref().map(|t| t.0.to_string()))
        .or_else(|| event.event_time.as_ref().map(|t| t.0.to_string()))
        .unwrap_or_default()
}
