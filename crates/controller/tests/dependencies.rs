//! `spec.dependsOn`: an app waits, saying for whom, while an app it depends
//! on is not yet Healthy, and syncs as soon as it is; a cycle is refused,
//! naming it.

mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use support::{Repo, app, started};
use tether_controller::api::Application;
use tether_core::health::HealthStatus;
use tether_testkit::{condition, eventually, status_of};

/// A LoadBalancer Service stays Progressing until its status names an
/// address (nothing assigns one here), which the test then writes.
const BALANCER: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: front\nspec:\n  type: LoadBalancer\n  selector: {app: front}\n  ports:\n    - port: 80\n";

fn config_map(name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: v\n")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_waits_for_its_dependency_to_be_healthy_and_then_syncs_at_once() {
    let ns = started("depends").await;
    let repo = Repo::new();
    repo.commit(
        &[
            ("base/front.yaml", BALANCER.to_string()),
            ("shop/settings.yaml", config_map("settings")),
        ],
        "base and shop",
    );
    app(&ns, "base", &repo, "base").apply(&ns.client).await;
    let mut shop = app(&ns, "shop", &repo, "shop").manifest().clone();
    shop["spec"]["dependsOn"] = json!([{"name": "base"}]);
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &shop.to_string());

    let apps: Api<Application> = ns.api();
    status_of(&apps, "base", "base Progressing", |s| {
        s.health.status == HealthStatus::Progressing
    })
    .await;
    // Until base's status is for its current spec, shop waits saying so;
    // then it names base's sync and health.
    let expected = format!(
        "waiting for Application {}/base: Synced × Progressing",
        ns.name
    );
    status_of(
        &apps,
        "shop",
        "shop waiting for base, Synced × Progressing",
        |s| {
            condition(s, "Reconciled").is_some_and(|reconciled| {
                reconciled.reason == "WaitingForDependency"
                    && reconciled.message.contains(&expected)
            })
        },
    )
    .await;
    let config_maps: Api<ConfigMap> = ns.api();
    assert!(config_maps.get_opt("settings").await.unwrap().is_none());

    // The balancer gets its address: base is Healthy, and shop syncs.
    let services: Api<Service> = ns.api();
    services
        .patch_status(
            "front",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.2"}]}}})),
        )
        .await
        .unwrap();
    status_of(&apps, "base", "base Healthy", |s| {
        s.health.status == HealthStatus::Healthy
    })
    .await;
    let healthy = Instant::now();
    eventually("shop's ConfigMap applied", || async {
        config_maps.get_opt("settings").await.ok()?.map(|_| ())
    })
    .await;
    let after = healthy.elapsed();
    println!("shop synced {after:?} after base was seen Healthy");
    assert!(after < Duration::from_secs(2), "{after:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cycle_of_dependencies_is_refused_naming_it() {
    let ns = started("cycle").await;
    let repo = Repo::new();
    repo.commit(
        &[
            ("c/one.yaml", config_map("one")),
            ("d/two.yaml", config_map("two")),
        ],
        "c and d",
    );
    for (name, other) in [("c", "d"), ("d", "c")] {
        let mut manifest = app(&ns, name, &repo, name).manifest().clone();
        manifest["spec"]["dependsOn"] = json!([{"name": other}]);
        ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &manifest.to_string());
    }
    let apps: Api<Application> = ns.api();
    let n = &ns.name;
    let status = status_of(&apps, "c", "c refused for the cycle", |s| {
        condition(s, "Reconciled").is_some_and(|reconciled| reconciled.reason == "DependencyCycle")
    })
    .await;
    assert_eq!(
        condition(&status, "Reconciled").unwrap().message,
        format!("dependsOn makes a cycle: {n}/c → {n}/d → {n}/c; remove one of these dependencies")
    );
    let config_maps: Api<ConfigMap> = ns.api();
    assert!(config_maps.get_opt("one").await.unwrap().is_none());
}
