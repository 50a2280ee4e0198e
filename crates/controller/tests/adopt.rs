//! `adopt_records` against the real control plane: the live values are
//! read from the cluster at adopt time, not from the (stale) status.

mod support;

use serde_json::json;
use support::{Repo, web};
use tether_controller::adopt::{AdoptOptions, AdoptRecord, adopt_records};
use tether_controller::api::{Application, ApplicationSpec};
use tether_core::ObjectRef;
use tether_core::drift::DriftedField;
use tether_testkit::TestNamespace;

fn record(
    kind: &str,
    group: &str,
    name: &str,
    ns: &str,
    path: &str,
    stale: serde_json::Value,
) -> AdoptRecord {
    AdoptRecord {
        object: ObjectRef {
            group: group.into(),
            kind: kind.into(),
            namespace: Some(ns.into()),
            name: name.into(),
        },
        fields: vec![DriftedField {
            path: path.into(),
            pointer: String::new(),
            desired: None,
            live: Some(stale),
            writer: None,
        }],
    }
}

#[tokio::test]
async fn adopt_commits_the_values_live_now_into_the_apps_repository() {
    let ns = TestNamespace::create("adopt").await;
    let repo = Repo::new();
    repo.commit(&web(2, "hello"), "shop");
    repo.git(&["config", "receive.denyCurrentBranch", "updateInstead"]);
    ns.kubectl_ok(&["apply", "-f", &repo.dir.join("app").to_string_lossy()]);
    for args in [
        vec!["scale", "deployment/web", "--replicas=5"],
        vec![
            "patch",
            "configmap/settings",
            "-p",
            r#"{"data":{"greeting":"hi there"}}"#,
        ],
    ] {
        ns.kubectl_ok(&args);
    }
    let spec: ApplicationSpec = serde_json::from_value(json!({
        "source": {"repoURL": repo.url(), "revision": "main", "path": "app"},
        "destination": {"namespace": ns.name},
    }))
    .unwrap();
    let app = Application::new("shop", spec);
    // Status said 3 replicas; the cluster has 5 now.
    let records = [
        record(
            "Deployment",
            "apps",
            "web",
            &ns.name,
            "spec.replicas",
            json!(3),
        ),
        record(
            "ConfigMap",
            "",
            "settings",
            &ns.name,
            "data.greeting",
            json!("hi"),
        ),
    ];
    let options = AdoptOptions {
        author: "Ada Lovelace <ada@example.com>".parse().unwrap(),
        branch: None,
        credentials: None,
        sandbox: Default::default(),
    };
    let adopted = adopt_records(
        ns.client.clone(),
        &app,
        &records,
        "INC-1: load spike",
        &options,
    )
    .await
    .unwrap();
    assert_eq!(repo.git(&["rev-parse", "main"]), adopted.commit);
    let web = std::fs::read_to_string(repo.dir.join("app/web.yaml")).unwrap();
    assert!(web.contains("  replicas: 5\n"), "{web}");
    let config = std::fs::read_to_string(repo.dir.join("app/config.yaml")).unwrap();
    assert!(config.contains("  greeting: \"hi there\"\n"), "{config}");
    let log = repo.git(&["log", "-1", "--format=%an|%s"]);
    assert_eq!(log, "Ada Lovelace|Adopt live changes: INC-1: load spike");
}
