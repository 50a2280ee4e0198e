//! The controller with nothing but the RBAC `tether install` gives its
//! service account: enough to sync an ordinary app.

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::Api;
use support::{Repo, app, config_for, web};
use tether_controller::install;
use tether_testkit::{TestNamespace, eventually, status_where};

const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector: {app: web}\n  ports:\n    - port: 80\n";

#[tokio::test]
async fn the_controller_as_its_service_account_syncs_a_deployment_a_config_map_and_a_service() {
    tether_testkit::log_file();
    let ns = TestNamespace::create("least-privilege").await;
    install::install(ns.client.clone(), &ns.name).await.unwrap();
    // The aggregation controller fills tether-applier from tether-applier-default.
    let roles: Api<ClusterRole> = Api::all(ns.client.clone());
    eventually("tether-applier aggregates the default grants", || async {
        let role = roles.get(install::rbac::APPLIER_ROLE).await.ok()?;
        role.rules.filter(|rules| !rules.is_empty()).map(|_| ())
    })
    .await;
    let repo = Repo::new();
    let mut files = web(1, "hello");
    files.push(("app/service.yaml", SERVICE.to_string()));
    repo.commit(&files, "web, settings and a service");

    let controller = ns.client_as_service_account(install::SERVICE_ACCOUNT).await;
    let config = config_for(&ns);
    let running = tokio::spawn(async move {
        if let Err(error) = tether_controller::run(controller, config).await {
            panic!("controller stopped: {error}");
        }
    });
    let apps = app(&ns, "shop", &repo, "app").apply(&ns.client).await;
    status_where(&apps, "Synced", |s| s.sync.status == "Synced").await;
    ns.get::<Deployment>("web").await;
    ns.get::<ConfigMap>("settings").await;
    ns.get::<Service>("web").await;
    running.abort();
}
