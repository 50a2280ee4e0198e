//! Kubernetes Events (events.k8s.io/v1) that cannot flood etcd.
//!
//! The first occurrence of an event — same object, type, reason and action
//! — is created at once; repeats only count up its `series` locally, and
//! the count is written at most once per [`SERIES_INTERVAL`] (by the next
//! repeat, or by [`Recorder::flush`]), as client-go's event broadcaster
//! does. A flapping app therefore costs a handful of writes a minute, not
//! one per loop; an event not repeated for [`FORGET_AFTER`] starts over.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};
use tether_core::notice::EventReason;

/// The least time between two writes of one event's series.
pub const SERIES_INTERVAL: Duration = Duration::from_secs(60);
/// A series not repeated for this long is forgotten: the next occurrence
/// is a new Event.
pub const FORGET_AFTER: Duration = Duration::from_secs(600);

/// What makes two events one series: the object, the type, the reason and
/// the action, kept as their hash (six strings per series otherwise, held
/// for [`FORGET_AFTER`] for every app that had an event).
fn series_key(event: &Event, regarding: &ObjectReference) -> u64 {
    let mut hasher = DefaultHasher::new();
    (
        &regarding.kind,
        &regarding.namespace,
        &regarding.name,
        &regarding.uid,
        event.type_ == EventType::Warning,
        &event.reason,
        &event.action,
    )
        .hash(&mut hasher);
    hasher.finish()
}

struct Series {
    /// The Event's namespace and name.
    namespace: String,
    name: String,
    count: i32,
    written: i32,
    note: Option<String>,
    last_observed: Timestamp,
    last_write: Instant,
}

/// Publishes Events, aggregating repeats (see the module docs).
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    series: Mutex<HashMap<u64, Series>>,
}

/// A write the recorder decided on.
enum Write {
    Create(Box<K8sEvent>),
    Series {
        namespace: String,
        name: String,
        count: i32,
        note: Option<String>,
        last_observed: Timestamp,
    },
}

impl Recorder {
    pub fn new(client: Client, reporter: Reporter) -> Recorder {
        Recorder {
            client,
            reporter,
            series: Mutex::default(),
        }
    }

    /// Records an Event about `regarding`, in one of Tether's
    /// [`EventReason`]s; a failure is only logged: an Event is never worth
    /// failing the work it tells of.
    pub async fn tell(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: EventReason,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_,
            reason: reason.as_str().into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        if let Err(error) = self.publish(&event, regarding).await {
            tracing::debug!(%error, %reason, "publishing event failed");
        }
    }

    /// Records `event` about `regarding`: creates it the first time, and
    /// otherwise counts it, writing the count when it is due.
    async fn publish(&self, event: &Event, regarding: &ObjectReference) -> Result<(), kube::Error> {
        let key = series_key(event, regarding);
        let now = Timestamp::now();
        let write = {
            let mut all = self.series.lock().expect("lock");
            all.retain(|_, s| s.last_write.elapsed() < FORGET_AFTER || s.count > s.written);
            // A burst (the first sync of a thousand apps) grew the table;
            // give it back once most of it is forgotten.
            let held = all.len();
            if all.capacity() > 64 && held < all.capacity() / 4 {
                all.shrink_to(held * 2);
            }
            match all.get_mut(&key) {
                Some(series) => {
                    series.count += 1;
                    series.note.clone_from(&event.note);
                    series.last_observed = now;
                    due(series)
                }
                None => {
                    let created = self.event(event, regarding, now);
                    all.insert(
                        key,
                        Series {
                            namespace: created.metadata.namespace.clone().unwrap_or_default(),
                            name: created.metadata.name.clone().unwrap_or_default(),
                            count: 1,
                            written: 1,
                            note: event.note.clone(),
                            last_observed: now,
                            last_write: Instant::now(),
                        },
                    );
                    Some(Write::Create(Box::new(created)))
                }
            }
        };
        match write {
            Some(write) => self.write(write).await,
            None => Ok(()),
        }
    }

    /// Writes every counted repeat whose write is due.
    pub async fn flush(&self) {
        let writes: Vec<Write> = {
            let mut all = self.series.lock().expect("lock");
            all.values_mut().filter_map(due).collect()
        };
        for write in writes {
            if let Err(error) = self.write(write).await {
                tracing::debug!(%error, "writing an event series failed");
            }
        }
    }

    /// Flushes due repeats every few seconds, forever.
    pub async fn run_flush(&self) {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            self.flush().await;
        }
    }

    fn event(&self, event: &Event, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let object = regarding.name.as_deref().unwrap_or("tether");
        K8sEvent {
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: event.secondary.clone(),
            note: event.note.as_deref().map(bounded),
            metadata: ObjectMeta {
                namespace: Some(namespace),
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(
                match event.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .into(),
            ),
            ..K8sEvent::default()
        }
    }

    async fn write(&self, write: Write) -> Result<(), kube::Error> {
        match write {
            Write::Create(event) => {
                let namespace = event.metadata.namespace.clone().unwrap_or_default();
                let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
                api.create(&PostParams::default(), &event).await.map(drop)
            }
            Write::Series {
                namespace,
                name,
                count,
                note,
                last_observed,
            } => {
                let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
                let patch = K8sEvent {
                    series: Some(EventSeries {
                        count,
                        last_observed_time: MicroTime(last_observed),
                    }),
                    note: note.as_deref().map(bounded),
                    ..K8sEvent::default()
                };
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map(drop)
            }
        }
    }
}

/// The series write of `series` when repeats are counted and the last
/// write is at least [`SERIES_INTERVAL`] old; marks them written.
fn due(series: &mut Series) -> Option<Write> {
    if series.count <= series.written || series.last_write.elapsed() < SERIES_INTERVAL {
        return None;
    }
    series.written = series.count;
    series.last_write = Instant::now();
    Some(Write::Series {
        namespace: series.namespace.clone(),
        name: series.name.clone(),
        count: series.count,
        note: series.note.clone(),
        last_observed: series.last_observed,
    })
}

/// The API server refuses a note over 1 kB.
fn bounded(note: &str) -> String {
    const MAX: usize = 1000;
    if note.len() <= MAX {
        return note.to_string();
    }
    let cut = (0..=MAX - 3)
        .rev()
        .find(|&i| note.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}…", &note[..cut])
}
