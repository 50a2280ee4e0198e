//! The routes in force: those of the `--notify-webhook` flags, fixed at
//! start, and those of the routes ConfigMap, replaced whenever its data
//! changes. Routes that do not parse are left out, logged once per change,
//! and kept as problems to show.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use tether_core::notice::Notice;

use super::route::{self, Route};

/// Every route, and what was left out.
pub struct RouteTable {
    flags: Vec<Arc<Route>>,
    flag_problems: Vec<String>,
    configured: RwLock<Configured>,
}

#[derive(Default)]
struct Configured {
    /// The ConfigMap's data, to notice when it changes.
    data: Option<BTreeMap<String, String>>,
    routes: Vec<Arc<Route>>,
    problems: Vec<String>,
}

impl RouteTable {
    /// The table with the routes of `--notify-webhook` `webhooks` (in
    /// order: `notify-webhook-1`, …) and none from a ConfigMap yet.
    pub fn new(webhooks: &[String]) -> RouteTable {
        let mut flags = Vec::new();
        let mut flag_problems = Vec::new();
        for (index, url) in webhooks.iter().enumerate() {
            match Route::webhook(index + 1, url) {
                Ok(route) => flags.push(Arc::new(route)),
                Err(error) => {
                    tracing::error!(%error, "a notification route was left out");
                    flag_problems.push(error.to_string());
                }
            }
        }
        RouteTable {
            flags,
            flag_problems,
            configured: RwLock::default(),
        }
    }

    /// Replaces the ConfigMap's routes with those in `configmap` (`None`:
    /// there is none). Each data key is a YAML list of routes. Returns
    /// whether anything changed.
    pub fn load(&self, configmap: Option<&ConfigMap>) -> bool {
        let data = configmap.map(|configmap| configmap.data.clone().unwrap_or_default());
        if self.configured.read().expect("lock").data == data {
            return false;
        }
        let mut taken: HashSet<String> = self.flags.iter().map(|r| r.name.clone()).collect();
        let mut routes = Vec::new();
        let mut problems = Vec::new();
        if let (Some(configmap), Some(data)) = (configmap, &data) {
            let name = format!(
                "ConfigMap {}/{}",
                configmap.namespace().unwrap_or_default(),
                configmap.name_any()
            );
            for (key, text) in data {
                let (good, bad) = route::parse(&format!("{name} key {key}"), text, &mut taken);
                routes.extend(good.into_iter().map(Arc::new));
                problems.extend(bad.iter().map(ToString::to_string));
            }
        }
        for problem in &problems {
            tracing::error!(%problem, "a notification route was left out");
        }
        tracing::info!(
            routes = routes.len(),
            left_out = problems.len(),
            "notification routes loaded"
        );
        *self.configured.write().expect("lock") = Configured {
            data,
            routes,
            problems,
        };
        true
    }

    /// The routes that want `notice`.
    pub fn matching(&self, notice: &Notice) -> Vec<Arc<Route>> {
        self.each_route(|route| route.wants(notice).then(|| route.clone()))
    }

    /// The names of the routes in force.
    pub fn names(&self) -> Vec<String> {
        self.each_route(|route| Some(route.name.clone()))
    }

    /// What `pick` takes of each route in force, flags' first.
    fn each_route<T>(&self, pick: impl FnMut(&Arc<Route>) -> Option<T>) -> Vec<T> {
        let configured = self.configured.read().expect("lock");
        self.flags
            .iter()
            .chain(&configured.routes)
            .filter_map(pick)
            .collect()
    }

    /// Why routes were left out, each naming the route and where it is
    /// written.
    pub fn problems(&self) -> Vec<String> {
        let configured = self.configured.read().expect("lock");
        self.flag_problems
            .iter()
            .chain(&configured.problems)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tether_core::notice::NoticeKind;

    use super::*;

    fn configmap(data: serde_json::Value) -> ConfigMap {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "tether-notifications", "namespace": "tether-system"},
            "data": data}))
        .unwrap()
    }

    fn notice(kind: NoticeKind) -> Notice {
        tether_testkit::notice(kind, "shop", &[])
    }

    #[test]
    fn flag_routes_stay_and_configmap_routes_follow_its_data() {
        let table = RouteTable::new(&["http://127.0.0.1:1/a".into(), "no url".into()]);
        assert_eq!(table.names(), ["notify-webhook-1"]);
        assert_eq!(
            table.problems(),
            ["--notify-webhook notify-webhook-2: url: relative URL without a base"]
        );
        let routes = configmap(json!({
            "a.yaml": "- {name: drift, url: 'http://127.0.0.1:2/', events: [drift-detected]}\n",
            "b.yaml": "- {name: notify-webhook-1, url: 'http://127.0.0.1:3/', events: ['*']}\n",
        }));
        assert!(table.load(Some(&routes)));
        assert!(!table.load(Some(&routes)), "unchanged data is not reloaded");
        assert_eq!(table.names(), ["notify-webhook-1", "drift"]);
        assert_eq!(table.problems().len(), 2);
        assert!(
            table.problems()[1].starts_with(
                "ConfigMap tether-system/tether-notifications key b.yaml line 1: route \"notify-webhook-1\": another route has this name"
            ),
            "{:?}",
            table.problems()
        );
        let names = |kind| {
            table
                .matching(&notice(kind))
                .iter()
                .map(|r| r.name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(NoticeKind::DriftDetected),
            ["notify-webhook-1", "drift"]
        );
        assert_eq!(names(NoticeKind::SyncFailed), ["notify-webhook-1"]);

        assert!(table.load(None));
        assert_eq!(table.names(), ["notify-webhook-1"]);
        assert_eq!(table.problems().len(), 1);
    }
}
