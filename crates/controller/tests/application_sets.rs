//! Generated apps (`ApplicationSet`): a Git directory generator over a
//! monorepo of 300 directories makes 300 apps from one fetch, and a
//! directory removed in a new commit removes its app but leaves its
//! objects; list and matrix generators; `preserveResourcesOnDeletion:
//! false` deletes an app with its objects; a template parameter no
//! generator makes is reported naming the set, the generator and the
//! parameter.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use support::{Repo, config_for, start_controller_with};
use tether_controller::Config;
use tether_controller::api::application::Condition;
use tether_controller::api::{Application, ApplicationSet};
use tether_testkit::git_server::HttpBackend;
use tether_testkit::{TestNamespace, eventually};

const SET_LABEL: &str = "tether.dev/application-set";

fn config_map(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: v\n")
}

/// A repository whose one commit has ConfigMap `name` at each `(path, name)`.
fn config_map_repo(maps: &[(&str, &str)]) -> Repo {
    let repo = Repo::new();
    let files: Vec<(&str, String)> = maps
        .iter()
        .map(|&(path, name)| (path, config_map(name)))
        .collect();
    repo.commit(&files, "ConfigMaps");
    repo
}

/// A controller for `ns` that looks at sets (and polls repositories)
/// every 3 s, with a resync far away.
async fn started(prefix: &str) -> TestNamespace {
    let ns = TestNamespace::create(prefix).await;
    let config = Config {
        resync: Duration::from_secs(300),
        poll_interval: Duration::from_secs(3),
        concurrency: 16,
        ..config_for(&ns)
    };
    start_controller_with(&ns, config).await;
    ns
}

async fn apply_set(ns: &TestNamespace, name: &str, spec: Value) -> Api<ApplicationSet> {
    let sets: Api<ApplicationSet> = ns.api();
    let set = json!({"apiVersion": "tether.dev/v1alpha1", "kind": "ApplicationSet",
        "metadata": {"name": name, "namespace": ns.name}, "spec": spec});
    sets.patch(
        name,
        &PatchParams::apply("test").force(),
        &Patch::Apply(&set),
    )
    .await
    .unwrap_or_else(|error| panic!("applying ApplicationSet {name}: {error}"));
    sets
}

/// The Applications labelled as `set`'s, by name.
async fn apps_of(ns: &TestNamespace, set: &str) -> Vec<Application> {
    let apps: Api<Application> = ns.api();
    let mut listed = apps
        .list(&ListParams::default().labels(&format!("{SET_LABEL}={set}")))
        .await
        .map(|list| list.items)
        .unwrap_or_default();
    listed.retain(|app| app.metadata.deletion_timestamp.is_none());
    listed.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    listed
}

fn names(apps: &[Application]) -> Vec<String> {
    apps.iter()
        .map(|app| app.metadata.name.clone().unwrap_or_default())
        .collect()
}

/// The Applications of `set` once there are `count` of them.
async fn apps_counted(ns: &TestNamespace, set: &str, count: usize, what: &str) -> Vec<Application> {
    eventually(what, || async {
        let apps = apps_of(ns, set).await;
        (apps.len() == count).then_some(apps)
    })
    .await
}

/// The first condition of set `name`'s status that `matches`.
async fn set_condition(
    sets: &Api<ApplicationSet>,
    name: &str,
    what: &str,
    matches: impl Fn(&Condition) -> bool,
) -> Condition {
    eventually(what, || async {
        let status = sets.get(name).await.ok()?.status?;
        status.conditions.into_iter().find(&matches)
    })
    .await
}

/// Polls `check` every 250 ms for up to `patience`.
async fn within<T, F, Fut>(patience: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + patience;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn three_hundred_directories_make_three_hundred_apps_from_one_fetch_and_a_removed_one_keeps_its_objects()
 {
    const APPS: usize = 300;
    let repo = Repo::new();
    let mut files: Vec<(String, String)> = (0..APPS)
        .map(|i| {
            (
                format!("apps/app-{i:03}/config.yaml"),
                config_map(&format!("cm-{i:03}")),
            )
        })
        .collect();
    files.push(("apps/legacy/config.yaml".into(), config_map("legacy")));
    files.push(("docs/readme.yaml".into(), config_map("docs")));
    repo.commit(&files, "a monorepo of 300 apps");
    let server = HttpBackend::start(&repo.publish("mono"), None);
    let ns = started("appset-mono").await;
    server.take_requests();

    let started_at = Instant::now();
    apply_set(
        &ns,
        "mono",
        json!({
            "generators": [{"git": {"repoURL": server.url("mono"), "revision": "main",
                "directories": [{"path": "apps/*"}, {"path": "apps/legacy", "exclude": true}]}}],
            "template": {
                "metadata": {"name": "{{path.basename}}", "labels": {"team": "{{path[0]}}"}},
                "spec": {"source": {"repoURL": server.url("mono"), "revision": "main", "path": "{{path}}"},
                         "destination": {"namespace": ns.name}}}
        }),
    )
    .await;
    within(Duration::from_secs(240), "300 generated apps", || async {
        (apps_of(&ns, "mono").await.len() == APPS).then_some(())
    })
    .await;
    let all_exist = started_at.elapsed();
    let apps: Api<Application> = ns.api();
    within(Duration::from_secs(600), "300 apps Synced", || async {
        let listed = apps.list(&ListParams::default()).await.ok()?;
        let synced = listed
            .items
            .iter()
            .filter(|app| {
                app.status
                    .as_ref()
                    .is_some_and(|s| s.sync.status == "Synced")
            })
            .count();
        (synced == APPS).then_some(())
    })
    .await;
    let all_synced = started_at.elapsed();
    let requests = server.take_requests();
    let listings = requests.iter().filter(|r| r.contains("/info/refs")).count();
    let fetches = pack_fetches(&requests);
    println!(
        "ApplicationSet over {APPS} directories: all {APPS} apps exist after {all_exist:.1?}, all Synced after {all_synced:.1?}; \
         git over HTTP meanwhile: {listings} ref listings, {fetches} pack fetch(es)"
    );
    assert!(fetches <= 1, "{fetches} fetches: {requests:?}");
    // A quiet spell lists refs and fetches nothing. (Counted by the command
    // each POST carries, so a listing whose GET and POST straddle two
    // windows is not mistaken for a fetch.)
    tokio::time::sleep(Duration::from_secs(4)).await;
    let quiet = server.take_requests();
    let quiet_listings = quiet.iter().filter(|r| r.contains("/info/refs")).count();
    println!("a quiet 4 s: {quiet_listings} ref listings");
    assert_eq!(pack_fetches(&quiet), 0, "{quiet:?}");
    let generated = apps_of(&ns, "mono").await;
    assert!(!names(&generated).contains(&"legacy".to_string()));
    let first = &generated[0];
    assert_eq!(first.metadata.labels.as_ref().unwrap()["team"], "apps");
    let owner = &first.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("ApplicationSet", "mono")
    );

    // Remove a directory in a new commit: its app goes, its objects stay.
    repo.git(&["rm", "-rq", "apps/app-007"]);
    repo.commit_all("retire app-007");
    repo.publish("mono");
    let removed_at = Instant::now();
    within(Duration::from_secs(60), "app-007 deleted", || async {
        apps.get_opt("app-007").await.ok()?.is_none().then_some(())
    })
    .await;
    println!(
        "a removed directory's app was deleted {:.1?} after the push",
        removed_at.elapsed()
    );
    let config_maps: Api<ConfigMap> = ns.api();
    assert!(
        config_maps.get_opt("cm-007").await.unwrap().is_some(),
        "the deleted app's ConfigMap must stay in place by default"
    );
    assert_eq!(apps_of(&ns, "mono").await.len(), APPS - 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn list_and_matrix_generators_make_one_app_per_parameter_set() {
    let repo = config_map_repo(&[
        ("svc/cart/config.yaml", "cart"),
        ("svc/shop/config.yaml", "shop"),
    ]);
    let ns = started("appset-matrix").await;
    let url = repo.file_url("matrix");
    apply_set(
        &ns,
        "envs",
        json!({
            "generators": [{"matrix": {"generators": [
                {"git": {"repoURL": url, "directories": [{"path": "svc/*"}]}},
                {"list": {"elements": [{"env": "dev"}, {"env": "prod", "wave": 2}]}}
            ]}}],
            "template": {
                "metadata": {"name": "{{path.basename}}-{{env}}", "labels": {"env": "{{env}}"}},
                "spec": {"source": {"repoURL": url, "path": "{{path}}"},
                         "destination": {"namespace": ns.name},
                         "syncPolicy": {"automated": false}}}
        }),
    )
    .await;
    let made = apps_counted(&ns, "envs", 4, "four matrix apps").await;
    assert_eq!(
        names(&made),
        ["cart-dev", "cart-prod", "shop-dev", "shop-prod"]
    );
    assert_eq!(made[1].spec.source.path, "svc/cart");
    assert_eq!(made[1].metadata.labels.as_ref().unwrap()["env"], "prod");

    let sets = apply_set(
        &ns,
        "listed",
        json!({
            "generators": [{"list": {"elements": [{"name": "alpha"}, {"name": "beta"}]}}],
            "template": {
                "metadata": {"name": "listed-{{name}}"},
                "spec": {"source": {"repoURL": url, "path": "svc/shop"},
                         "destination": {"namespace": ns.name}, "syncPolicy": {"automated": false}}}
        }),
    )
    .await;
    eventually("two listed apps", || async {
        (names(&apps_of(&ns, "listed").await) == ["listed-alpha", "listed-beta"]).then_some(())
    })
    .await;
    // An app deleted by hand is made again.
    let apps: Api<Application> = ns.api();
    let before: Application = ns.get("listed-beta").await;
    apps.delete("listed-beta", &Default::default())
        .await
        .unwrap();
    eventually("listed-beta made again", || async {
        let again = apps.get_opt("listed-beta").await.ok()??;
        (again.metadata.uid != before.metadata.uid).then_some(())
    })
    .await;
    let status = eventually("the set's status", || async {
        let status = sets.get("listed").await.ok()?.status?;
        (status.application_count == Some(2) && status.applications.len() == 2).then_some(status)
    })
    .await;
    let generated = status
        .conditions
        .iter()
        .find(|c| c.type_ == "ParametersGenerated")
        .unwrap();
    assert_eq!(generated.status, "True");

    // A second set generating a name the first one holds leaves it alone.
    let rival = apply_set(
        &ns,
        "rival",
        json!({
            "generators": [{"list": {"elements": [{"name": "alpha"}]}}],
            "template": {
                "metadata": {"name": "listed-{{name}}"},
                "spec": {"source": {"repoURL": url, "path": "svc/cart"},
                         "destination": {"namespace": ns.name}, "syncPolicy": {"automated": false}}}
        }),
    )
    .await;
    let taken = set_condition(&rival, "rival", "NameTaken", |c| {
        c.type_ == "ResourcesUpToDate" && c.reason == "NameTaken"
    })
    .await;
    assert!(taken.message.contains("listed-alpha"), "{}", taken.message);
    let alpha: Application = ns.get("listed-alpha").await;
    assert_eq!(alpha.spec.source.path, "svc/shop");
}

#[tokio::test(flavor = "multi_thread")]
async fn preserve_resources_on_deletion_false_deletes_a_dropped_app_with_its_objects() {
    let repo = config_map_repo(&[("a/config.yaml", "cm-a"), ("b/config.yaml", "cm-b")]);
    let ns = started("appset-cascade").await;
    let url = repo.file_url("cascade");
    let spec = |elements: Value| {
        json!({
            "generators": [{"list": {"elements": elements}}],
            "syncPolicy": {"preserveResourcesOnDeletion": false},
            "template": {
                "metadata": {"name": "app-{{dir}}"},
                "spec": {"source": {"repoURL": url, "path": "{{dir}}"},
                         "destination": {"namespace": ns.name}}}
        })
    };
    apply_set(&ns, "cascade", spec(json!([{"dir": "a"}, {"dir": "b"}]))).await;
    let config_maps: Api<ConfigMap> = ns.api();
    eventually("both ConfigMaps", || async {
        let a = config_maps.get_opt("cm-a").await.ok()??;
        let b = config_maps.get_opt("cm-b").await.ok()??;
        Some((a, b))
    })
    .await;
    apply_set(&ns, "cascade", spec(json!([{"dir": "a"}]))).await;
    let apps: Api<Application> = ns.api();
    eventually("app-b and its ConfigMap gone", || async {
        let app_gone = apps.get_opt("app-b").await.ok()?.is_none();
        let map_gone = config_maps.get_opt("cm-b").await.ok()?.is_none();
        (app_gone && map_gone).then_some(())
    })
    .await;
    assert!(config_maps.get_opt("cm-a").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_template_parameter_no_generator_makes_is_reported_naming_it() {
    let ns = started("appset-missing").await;
    let sets = apply_set(
        &ns,
        "broken",
        json!({
            "generators": [{"list": {"elements": [{"name": "alpha"}]}}],
            "template": {
                "metadata": {"name": "{{name}}"},
                "spec": {"source": {"repoURL": "file:///nowhere", "path": "{{ region }}"},
                         "destination": {"namespace": ns.name}}}
        }),
    )
    .await;
    let condition = set_condition(&sets, "broken", "ParametersGenerated False", |c| {
        c.type_ == "ParametersGenerated" && c.status == "False"
    })
    .await;
    assert_eq!(condition.reason, "TemplateFailed");
    assert_eq!(
        condition.message,
        "ApplicationSet broken: generators[0].list: template parameter region is not generated (used at spec.source.path)"
    );
    assert!(apps_of(&ns, "broken").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_clusters_generator_picks_registered_clusters_by_label_and_the_local_one() {
    let ns = started("appset-clusters").await;
    // A registered cluster: a labelled Secret in the controller's namespace
    // (nothing answers at its server; the apps here never sync).
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "eu-1", "namespace": ns.name,
                     "labels": {"tether.dev/cluster": "true", "env": "prod"}},
        "stringData": {"server": "https://127.0.0.1:9", "token": "unused"}});
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &secret.to_string());
    let spec = |prefix: &str, clusters: Value| {
        json!({
            "generators": [{"clusters": clusters}],
            "template": {
                "metadata": {"name": format!("{prefix}-{{{{nameNormalized}}}}"),
                             "labels": {"env": "{{metadata.labels.env}}"}},
                "spec": {"source": {"repoURL": "file:///nowhere", "path": "web"},
                         "destination": {"cluster": "{{name}}", "namespace": ns.name},
                         "syncPolicy": {"automated": false}}}
        })
    };
    apply_set(
        &ns,
        "prod",
        spec(
            "prod",
            json!({"selector": {"matchLabels": {"env": "prod"}}}),
        ),
    )
    .await;
    let made = apps_counted(&ns, "prod", 1, "the prod cluster's app").await;
    assert_eq!(names(&made), ["prod-eu-1"]);
    assert_eq!(made[0].spec.destination.cluster.as_deref(), Some("eu-1"));
    assert_eq!(made[0].metadata.labels.as_ref().unwrap()["env"], "prod");

    // With the local cluster, a template using a label the local cluster
    // lacks names the parameter; without that label, both apps come.
    let sets = apply_set(&ns, "all", spec("all", json!({"includeLocal": true}))).await;
    let failed = set_condition(&sets, "all", "the missing label reported", |c| {
        c.type_ == "ParametersGenerated" && c.status == "False"
    })
    .await;
    assert!(
        failed.message.contains(
            "generators[0].clusters: template parameter metadata.labels.env is not generated"
        ),
        "{}",
        failed.message
    );
    let mut plain = spec("all", json!({"includeLocal": true}));
    plain["template"]["metadata"]["labels"] = json!({});
    apply_set(&ns, "all", plain).await;
    let made = apps_counted(&ns, "all", 2, "the local and the registered cluster's apps").await;
    assert_eq!(names(&made), ["all-eu-1", "all-in-cluster"]);
    assert_eq!(made[1].spec.destination.cluster, None);
}

/// Upload-pack POSTs that are not protocol v2 ref listings: pack fetches.
fn pack_fetches(requests: &[String]) -> usize {
    requests
        .iter()
        .filter(|r| r.starts_with("POST") && !r.ends_with(" ls-refs"))
        .count()
}
