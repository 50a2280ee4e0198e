//! Which health rules judge an Application's objects: its own rules
//! (`spec.health.rules`) over the cluster's rules (the ConfigMap
//! [`RULES_CONFIGMAP`] in the controller's namespace) over the CEL rules
//! shipped with Tether, over the built-in checks.
//!
//! Rules are compiled when they change, never per assessment: the
//! cluster's when the ConfigMap's watch reports a change, an
//! Application's when its rules differ from the last compiled ones. A rule
//! that does not compile is left out and reported (in the `HealthRules`
//! condition of every Application it concerns, and in the log); it never
//! stops the controller. Assessing reads only the live object handed in,
//! which comes from a watch cache, so health costs no API request.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use serde_json::Value;
use tether_core::health::rules::assess_stacked;
use tether_core::health::{Health, RuleSet};
use tokio::sync::mpsc;

use crate::observe::live::AppKey;
use crate::watch_retry::Retrying;

/// The ConfigMap holding cluster-wide health rules, in the controller's
/// namespace. Every key is one rules file (the format of
/// `tether_core::health::rules::file`); when two keys have a rule for the
/// same kind, the key first in alphabetical order wins.
pub const RULES_CONFIGMAP: &str = "tether-health-rules";

/// The condition type that says whether an Application's health rules loaded.
pub const CONDITION: &str = "HealthRules";

/// Every rule layer the controller knows, compiled.
pub struct HealthRules {
    shipped: Arc<RuleSet>,
    cluster: RwLock<Arc<ClusterRules>>,
    apps: Mutex<HashMap<AppKey, Arc<AppRules>>>,
}

impl Default for HealthRules {
    fn default() -> Self {
        HealthRules {
            shipped: Arc::new(RuleSet::shipped()),
            cluster: RwLock::default(),
            apps: Mutex::default(),
        }
    }
}

impl HealthRules {
    /// Loads the cluster's rules from the ConfigMap (`None`: there is none).
    /// Returns whether anything changed, so callers re-assess only then.
    pub fn load_cluster(&self, configmap: Option<&ConfigMap>) -> bool {
        let data = configmap
            .and_then(|configmap| configmap.data.clone())
            .unwrap_or_default();
        let name = configmap.map(|configmap| {
            format!(
                "ConfigMap {}/{}",
                configmap.metadata.namespace.as_deref().unwrap_or_default(),
                configmap
                    .metadata
                    .name
                    .as_deref()
                    .unwrap_or(RULES_CONFIGMAP)
            )
        });
        if self.cluster.read().expect("lock").data == data {
            return false;
        }
        let rules = ClusterRules::compile(name.as_deref().unwrap_or(RULES_CONFIGMAP), data);
        for problem in &rules.problems {
            tracing::warn!(%problem, "a cluster health rule was left out");
        }
        *self.cluster.write().expect("lock") = Arc::new(rules);
        true
    }

    /// The rules that judge the objects of Application `app`, whose own
    /// rules are `own` (`spec.health.rules`). Compiles `own` only when it
    /// differs from what was compiled for this Application last time.
    pub fn for_app(&self, app: &AppKey, own: &[Value]) -> Judge {
        let cluster = self.cluster.read().expect("lock").clone();
        let mut apps = self.apps.lock().expect("lock");
        let app_rules = match apps.get(app) {
            Some(compiled) if compiled.source == own => compiled.clone(),
            _ => {
                let compiled = Arc::new(AppRules::compile(app, own));
                if let Some(problem) = &compiled.problem {
                    tracing::warn!(app = %format!("{}/{}", app.0, app.1), %problem,
                        "the Application's health rules were left out");
                }
                apps.insert(app.clone(), compiled.clone());
                compiled
            }
        };
        Judge {
            shipped: self.shipped.clone(),
            cluster,
            app: app_rules,
        }
    }
}

/// The cluster's rules: one rule set per ConfigMap key that compiled.
#[derive(Default)]
struct ClusterRules {
    /// The ConfigMap's data, to notice when it changes.
    data: BTreeMap<String, String>,
    layers: Vec<RuleSet>,
    problems: Vec<String>,
}

impl ClusterRules {
    fn compile(name: &str, data: BTreeMap<String, String>) -> Self {
        let mut layers = Vec::new();
        let mut problems = Vec::new();
        for (key, text) in &data {
            match RuleSet::from_yaml(&format!("{name} key {key}"), text) {
                Ok(rules) => layers.push(rules),
                Err(error) => problems.push(error.to_string()),
            }
        }
        ClusterRules {
            data,
            layers,
            problems,
        }
    }

    fn len(&self) -> usize {
        self.layers.iter().map(RuleSet::len).sum()
    }
}

/// An Application's own rules, compiled.
struct AppRules {
    source: Vec<Value>,
    rules: Option<RuleSet>,
    problem: Option<String>,
}

impl AppRules {
    fn compile(app: &AppKey, source: &[Value]) -> Self {
        if source.is_empty() {
            return AppRules {
                source: Vec::new(),
                rules: None,
                problem: None,
            };
        }
        // A rules file is YAML, and JSON is YAML.
        let text = serde_json::json!({ "rules": source }).to_string();
        let origin = format!("Application {}/{} spec.health.rules", app.0, app.1);
        let (rules, problem) = match RuleSet::from_yaml(&origin, &text) {
            Ok(rules) => (Some(rules), None),
            Err(error) => (None, Some(error.to_string())),
        };
        AppRules {
            source: source.to_vec(),
            rules,
            problem,
        }
    }
}

/// The rules for one Application at one moment: cheap to make, shares the
/// compiled layers.
pub struct Judge {
    shipped: Arc<RuleSet>,
    cluster: Arc<ClusterRules>,
    app: Arc<AppRules>,
}

impl Judge {
    /// The health of a live object (from a watch cache): the first layer
    /// with a rule for its kind judges it, else the built-in checks.
    pub fn assess(&self, live: &Value) -> Option<Health> {
        let mut stack: Vec<&RuleSet> = Vec::with_capacity(self.cluster.layers.len() + 2);
        stack.extend(self.app.rules.as_ref());
        stack.extend(self.cluster.layers.iter());
        stack.push(&self.shipped);
        assess_stacked(&stack, live)
    }

    /// Rules left out because they do not compile, each naming its origin
    /// and rule; empty when every rule loaded.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = self.cluster.problems.clone();
        problems.extend(self.app.problem.clone());
        problems
    }

    /// Which rules are in force, in one line.
    pub fn summary(&self) -> String {
        let own = self.app.rules.as_ref().map_or(0, RuleSet::len);
        format!(
            "{own} application, {} cluster and {} shipped health rules",
            self.cluster.len(),
            self.shipped.len()
        )
    }
}

/// Watches the rules ConfigMap in `namespace` and keeps `rules` current.
/// Returns once the first list has been loaded, with a stream that yields
/// each time the rules change afterwards (to re-assess every Application).
pub async fn watch_cluster_rules(
    client: kube::Client,
    namespace: &str,
    rules: Arc<HealthRules>,
) -> impl Stream<Item = ()> + Send + 'static {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={RULES_CONFIGMAP}"));
    let writer = reflector::store::Writer::default();
    let store: Store<ConfigMap> = writer.as_reader();
    let (changed_tx, changed_rx) = mpsc::unbounded_channel();
    let stream = reflector::reflector(writer, watcher(api, config).retrying());
    let reader = store.clone();
    let watched = rules.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone,
                ) => {
                    let current = reader.state().into_iter().next();
                    if watched.load_cluster(current.as_deref()) {
                        let _ = changed_tx.send(());
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "health rules watch interrupted; retrying")
                }
            }
        }
    });
    let _ = store.wait_until_ready().await;
    rules.load_cluster(store.state().into_iter().next().as_deref());
    futures::stream::unfold(changed_rx, |mut rx| async move {
        rx.recv().await?;
        Some(((), rx))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tether_core::health::HealthStatus;

    use super::*;

    fn configmap(data: Value) -> ConfigMap {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": RULES_CONFIGMAP, "namespace": "tether-system"},
            "data": data}))
        .unwrap()
    }

    fn widget(ready: bool) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w"}, "status": {"ready": ready}})
    }

    const CLUSTER_RULE: &str = "rules:\n- group: example.com\n  kinds: [Widget]\n  degraded: \"!get(self, 'status.ready', false)\"\n  healthy: 'true'\n";

    fn key() -> AppKey {
        ("shop".into(), "web".into())
    }

    #[test]
    fn cluster_rules_judge_kinds_no_built_in_check_knows() {
        let rules = HealthRules::default();
        // Without a rule, the generic inference reads the flag as work underway.
        let generic = rules.for_app(&key(), &[]).assess(&widget(false)).unwrap();
        assert_eq!(generic.status, HealthStatus::Progressing);
        assert_eq!(generic.message, "Widget w: status.ready = false");
        assert!(rules.load_cluster(Some(&configmap(json!({"widgets.yaml": CLUSTER_RULE})))));
        let judge = rules.for_app(&key(), &[]);
        let health = judge.assess(&widget(false)).unwrap();
        assert_eq!(health.status, HealthStatus::Degraded);
        assert!(judge.problems().is_empty());
        assert!(judge.summary().starts_with("0 application, 1 cluster and "));
    }

    #[test]
    fn loading_the_same_configmap_again_changes_nothing() {
        let rules = HealthRules::default();
        let configmap = configmap(json!({"widgets.yaml": CLUSTER_RULE}));
        assert!(rules.load_cluster(Some(&configmap)));
        assert!(!rules.load_cluster(Some(&configmap)));
        assert!(rules.load_cluster(None));
    }

    #[test]
    fn application_rules_override_cluster_rules() {
        let rules = HealthRules::default();
        rules.load_cluster(Some(&configmap(json!({"widgets.yaml": CLUSTER_RULE}))));
        let own = [json!({"group": "example.com", "kinds": ["Widget"], "suspended": "true"})];
        let health = rules.for_app(&key(), &own).assess(&widget(false)).unwrap();
        assert_eq!(health.status, HealthStatus::Suspended);
        // Another Application still sees the cluster's rule.
        let other = ("shop".to_string(), "api".to_string());
        let health = rules.for_app(&other, &[]).assess(&widget(true)).unwrap();
        assert_eq!(health.status, HealthStatus::Healthy);
    }

    #[test]
    fn a_rule_that_does_not_compile_is_left_out_and_named() {
        let rules = HealthRules::default();
        let broken =
            "rules:\n- group: example.com\n  kinds: [Gadget]\n  degraded: 'self.status.('\n";
        rules.load_cluster(Some(&configmap(
            json!({"a-broken.yaml": broken, "widgets.yaml": CLUSTER_RULE}),
        )));
        let own = [json!({"group": "example.com", "kinds": ["Gizmo"], "healthy": "1 +"})];
        let judge = rules.for_app(&key(), &own);
        let problems = judge.problems();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].starts_with(
                "ConfigMap tether-system/tether-health-rules key a-broken.yaml: rule example.com/Gadget: `degraded` does not compile"
            ),
            "{}",
            problems[0]
        );
        assert!(
            problems[1].starts_with(
                "Application shop/web spec.health.rules: rule example.com/Gizmo: `healthy` does not compile"
            ),
            "{}",
            problems[1]
        );
        // The good key still applies.
        let health = judge.assess(&widget(false)).unwrap();
        assert_eq!(health.status, HealthStatus::Degraded);
    }

    #[test]
    fn a_rule_that_fails_at_run_time_is_unknown_with_the_error() {
        let rules = HealthRules::default();
        let own = [json!({"group": "example.com", "kinds": ["Widget"],
            "degraded": "self.status.missing.deeper == 1"})];
        let health = rules.for_app(&key(), &own).assess(&widget(true)).unwrap();
        assert_eq!(health.status, HealthStatus::Unknown);
        assert!(
            health
                .message
                .contains("health rule Application shop/web spec.health.rules"),
            "{}",
            health.message
        );
    }
}
