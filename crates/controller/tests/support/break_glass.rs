//! Break-glass tests with the controller in a namespace of its own
//! (`ctl`, where `tether install` went and the audit records live),
//! watching a tenant's namespace (`ns`, where the app and its windows are).

use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use tether_controller::api::BreakGlass;
use tether_controller::break_glass::request::{self, Opening};
use tether_controller::{Config, install};
use tether_core::window::DEFAULT_MAX_TTL;
use tether_testkit::{TestNamespace, eventually, object_where};
use tokio::task::JoinHandle;

use super::{Repo, config_for, create_app, spawn_controller, status_where, web};

/// A tenant namespace with a synced app, and the controller's own.
pub struct Setup {
    pub ns: TestNamespace,
    pub ctl: TestNamespace,
    pub config: Config,
    pub controller: JoinHandle<()>,
    _repo: Repo,
}

/// Installs Tether into a new `ctl`, starts a controller there for a new
/// `ns` honouring windows up to `cap`, and syncs app `shop` in `ns`.
pub async fn setup(prefix: &str, cap: Duration) -> Setup {
    tether_testkit::log_file();
    let ns = TestNamespace::create(prefix).await;
    let ctl = TestNamespace::create(&format!("{prefix}-ctl")).await;
    install::install(ctl.client.clone(), &ctl.name)
        .await
        .unwrap();
    let repo = Repo::new();
    repo.commit(&web(2, "hello"), "web");
    let config = Config {
        lease_namespace: ctl.name.clone(),
        max_window_ttl: cap,
        ..config_for(&ns)
    };
    let controller = spawn_controller(&ns, config.clone());
    let apps = create_app(&ns, &repo).await;
    status_where(&apps, "Synced", |s| {
        s.sync.status == "Synced" && !s.inventory.is_empty()
    })
    .await;
    Setup {
        ns,
        ctl,
        config,
        controller,
        _repo: repo,
    }
}

/// Stops the controller and starts a new one (a new process, a new Lease
/// identity), as a crash-looping pod would.
pub async fn restart(setup: &mut Setup, generation: u32) {
    setup.controller.abort();
    let _ = (&mut setup.controller).await;
    let config = Config {
        identity: format!("{}-{generation}", setup.config.identity),
        ..setup.config.clone()
    };
    setup.controller = spawn_controller(&setup.ns, config);
}

/// What `tether break-glass open shop` asks for, with the default cap.
pub fn opening(ns: &TestNamespace, resources: &[&str], ttl: Duration) -> Opening {
    Opening {
        namespace: ns.name.clone(),
        app: "shop".into(),
        resources: resources
            .iter()
            .map(|r| request::parse_resource(r).unwrap())
            .collect(),
        reason: "INC-66: audit drill".into(),
        ttl,
        max_ttl: DEFAULT_MAX_TTL,
    }
}

/// Opens the window `opening` asks for, and waits until the controller
/// has marked it Open: from then on a change is recorded in it, not
/// reverted (the controller knows windows from its watch, a moment after
/// they are created).
pub async fn open_in_force(ns: &TestNamespace, opening: Opening) -> BreakGlass {
    let window = request::open(&ns.client, opening).await.unwrap();
    in_force(ns, &window.name_any()).await
}

/// Window `name` once the controller has marked it Open.
pub async fn in_force(ns: &TestNamespace, name: &str) -> BreakGlass {
    window_where(ns, name, "the window Open", |w| {
        w.status
            .as_ref()
            .is_some_and(|s| s.phase.is_some_and(|phase| phase == "Open"))
    })
    .await
}

/// Opens a ten-minute window over all of app `shop` in `ns`, in force;
/// returns its name.
pub async fn open_window(ns: &TestNamespace) -> String {
    open_in_force(ns, opening(ns, &[], Duration::from_secs(600)))
        .await
        .name_any()
}

/// Window `name` once `check` holds (panics with the last seen after a while).
pub async fn window_where(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&BreakGlass) -> bool,
) -> BreakGlass {
    let api: Api<BreakGlass> = Api::namespaced(ns.client.clone(), &ns.name);
    object_where(&api, name, what, check).await
}

/// Runs what must be refused; returns kubectl's stderr.
pub fn refused(output: Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success(),
        "{what} was let through: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    stderr
}

/// Waits until the Events about `name` (a window) include each of
/// `reasons` (a window's Events are created after its status is written).
pub async fn wait_for_events(ns: &TestNamespace, name: &str, reasons: &[&str]) {
    let events: Api<Event> = Api::namespaced(ns.client.clone(), &ns.name);
    let about = ListParams::default().fields(&format!("involvedObject.name={name}"));
    eventually(&format!("Events {reasons:?} about {name}"), || async {
        let listed = events.list(&about).await.ok()?.items;
        let seen: Vec<String> = listed.into_iter().filter_map(|e| e.reason).collect();
        reasons
            .iter()
            .all(|reason| seen.iter().any(|s| s == reason))
            .then_some(())
    })
    .await;
}
