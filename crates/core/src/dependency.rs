//! Dependencies between apps (`spec.dependsOn`, as Flux's `dependsOn`):
//! an app syncs only once every app it depends on is Synced and Healthy at
//! its current spec; a cycle is refused, naming it.
//!
//! Pure: the controller gives what it knows of each app, this module says
//! whether to go on, wait (and for whom), or refuse.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::health::HealthStatus;
use crate::state::SyncStatus;

/// An app, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AppName {
    pub namespace: String,
    pub name: String,
}

impl AppName {
    pub fn new(namespace: &str, name: &str) -> AppName {
        AppName {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for AppName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What the controller knows of one app another depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub sync: SyncStatus,
    pub health: HealthStatus,
    /// The status was written for the app's current spec
    /// (`status.observedGeneration == metadata.generation`).
    pub current: bool,
    /// The health message, to say why it is not ready.
    pub message: String,
    /// The apps it depends on itself.
    pub depends_on: Vec<AppName>,
}

/// Whether an app may go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ready,
    /// Waiting for these apps, each with why.
    Waiting(Vec<(AppName, String)>),
    /// The dependencies loop back to the app: the loop, in order.
    Cycle(Vec<AppName>),
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Ready => write!(f, "every dependency is Synced and Healthy"),
            Verdict::Waiting(waiting) => {
                let each: Vec<String> = waiting
                    .iter()
                    .map(|(app, why)| format!("Application {app}: {why}"))
                    .collect();
                write!(f, "waiting for {}", each.join("; "))
            }
            Verdict::Cycle(cycle) => {
                let names: Vec<String> = cycle.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "dependsOn makes a cycle: {} → {}; remove one of these dependencies",
                    names.join(" → "),
                    names[0]
                )
            }
        }
    }
}

/// Whether `app`, depending on `depends_on`, may sync: `known` says what
/// is known of every app (missing: not created yet).
pub fn judge(app: &AppName, depends_on: &[AppName], known: &BTreeMap<AppName, Known>) -> Verdict {
    if let Some(cycle) = cycle_through(app, depends_on, known) {
        return Verdict::Cycle(cycle);
    }
    let waiting: Vec<(AppName, String)> = depends_on
        .iter()
        .filter_map(|dependency| {
            let why = match known.get(dependency) {
                None => "does not exist".to_string(),
                Some(known) if !known.current => {
                    "its status is not yet for its current spec".to_string()
                }
                Some(known)
                    if known.sync == SyncStatus::Synced
                        && known.health == HealthStatus::Healthy =>
                {
                    return None;
                }
                Some(known) => match known.message.is_empty() {
                    true => format!("{} × {}", known.sync, known.health),
                    false => format!("{} × {} ({})", known.sync, known.health, known.message),
                },
            };
            Some((dependency.clone(), why))
        })
        .collect();
    match waiting.is_empty() {
        true => Verdict::Ready,
        false => Verdict::Waiting(waiting),
    }
}

/// A path of dependencies from `app` back to itself, if one exists.
fn cycle_through(
    app: &AppName,
    depends_on: &[AppName],
    known: &BTreeMap<AppName, Known>,
) -> Option<Vec<AppName>> {
    let next = |of: &AppName| -> Vec<AppName> {
        match of == app {
            true => depends_on.to_vec(),
            false => known
                .get(of)
                .map(|k| k.depends_on.clone())
                .unwrap_or_default(),
        }
    };
    // Depth-first from the app, remembering the path.
    let mut seen = BTreeSet::new();
    let mut path = vec![app.clone()];
    fn walk(
        path: &mut Vec<AppName>,
        seen: &mut BTreeSet<AppName>,
        next: &dyn Fn(&AppName) -> Vec<AppName>,
    ) -> bool {
        let here = path.last().expect("a path").clone();
        for dependency in next(&here) {
            if dependency == path[0] {
                return true;
            }
            if seen.insert(dependency.clone()) {
                path.push(dependency);
                if walk(path, seen, next) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    walk(&mut path, &mut seen, &next).then_some(path)
}

/// The apps among `all` that depend on `app` (to wake when it changes).
pub fn dependents<'a>(
    app: &AppName,
    all: impl IntoIterator<Item = (&'a AppName, &'a [AppName])>,
) -> Vec<AppName> {
    all.into_iter()
        .filter(|(_, depends_on)| depends_on.contains(app))
        .map(|(name, _)| name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(n: &str) -> AppName {
        AppName::new("team", n)
    }

    fn known(sync: SyncStatus, health: HealthStatus, depends_on: &[&str]) -> Known {
        Known {
            sync,
            health,
            current: true,
            message: String::new(),
            depends_on: depends_on.iter().map(|n| name(n)).collect(),
        }
    }

    /// Synced and Healthy apps, each with the dependencies it names.
    fn graph(apps: &[(&str, &[&str])]) -> BTreeMap<AppName, Known> {
        apps.iter()
            .map(|(app, depends_on)| {
                let healthy = known(SyncStatus::Synced, HealthStatus::Healthy, depends_on);
                (name(app), healthy)
            })
            .collect()
    }

    #[test]
    fn an_app_waits_while_its_dependency_is_progressing_and_goes_once_it_is_healthy() {
        let mut apps = BTreeMap::new();
        let mut crds = known(SyncStatus::Synced, HealthStatus::Progressing, &[]);
        crds.message = "Deployment team/operator: 0/1 available".into();
        apps.insert(name("crds"), crds);
        let verdict = judge(&name("app"), &[name("crds")], &apps);
        assert_eq!(
            verdict.to_string(),
            "waiting for Application team/crds: Synced × Progressing (Deployment team/operator: 0/1 available)"
        );
        apps.get_mut(&name("crds")).unwrap().health = HealthStatus::Healthy;
        assert_eq!(judge(&name("app"), &[name("crds")], &apps), Verdict::Ready);
    }

    #[test]
    fn a_dependency_that_does_not_exist_or_is_out_of_sync_or_stale_is_waited_for() {
        let mut apps = BTreeMap::new();
        apps.insert(
            name("b"),
            known(SyncStatus::OutOfSync, HealthStatus::Healthy, &[]),
        );
        let mut stale = known(SyncStatus::Synced, HealthStatus::Healthy, &[]);
        stale.current = false;
        apps.insert(name("c"), stale);
        let Verdict::Waiting(waiting) =
            judge(&name("a"), &[name("b"), name("c"), name("d")], &apps)
        else {
            panic!("not waiting");
        };
        let who: Vec<String> = waiting.iter().map(|(app, _)| app.name.clone()).collect();
        assert_eq!(who, ["b", "c", "d"]);
        assert_eq!(waiting[2].1, "does not exist");
    }

    #[test]
    fn a_cycle_is_refused_naming_each_app_of_it_in_order() {
        let apps = graph(&[("b", &["c"]), ("c", &["a"])]);
        let verdict = judge(&name("a"), &[name("b")], &apps);
        assert_eq!(
            verdict.to_string(),
            "dependsOn makes a cycle: team/a → team/b → team/c → team/a; remove one of these dependencies"
        );
        // Depending on oneself is the shortest cycle.
        assert!(matches!(
            judge(&name("a"), &[name("a")], &apps),
            Verdict::Cycle(_)
        ));
    }

    #[test]
    fn a_diamond_is_not_a_cycle() {
        let apps = graph(&[("b", &["d"]), ("c", &["d"]), ("d", &[])]);
        assert_eq!(
            judge(&name("a"), &[name("b"), name("c")], &apps),
            Verdict::Ready
        );
    }

    #[test]
    fn the_apps_to_wake_are_those_that_name_the_changed_one() {
        let deps_b = vec![name("a")];
        let deps_c: Vec<AppName> = vec![];
        let all = [
            (&name("b"), deps_b.as_slice()),
            (&name("c"), deps_c.as_slice()),
        ];
        assert_eq!(dependents(&name("a"), all), vec![name("b")]);
    }
}
