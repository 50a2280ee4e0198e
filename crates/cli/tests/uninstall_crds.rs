//! `tether uninstall --crds`, in a test binary (and control plane) of its
//! own: deleting the CRDs deletes every Application in the cluster.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use support::{run_controller, settings_repo, tether, text};
use tether_controller::api::Application;
use tether_testkit::{TestNamespace, application, eventually, status_of};

#[tokio::test]
async fn uninstall_with_crds_warns_deletes_every_application_and_keeps_their_objects() {
    let ns = TestNamespace::create("uninstall-crds").await;
    support::tether_ok(&ns, &["install", "--namespace", &ns.name]);
    let repo = settings_repo();
    // With the cascade finalizer, which would delete the app's objects.
    let mut app = application("shop", &ns.name, &repo.url(), "app")
        .manifest()
        .clone();
    app["metadata"]["finalizers"] = serde_json::json!(["tether.dev/cascade"]);
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &app.to_string());
    let _controller = run_controller(&ns, "uninstall-crds");
    let apps: Api<Application> = ns.api();
    status_of(&apps, "shop", "Synced", |s| s.sync.status == "Synced").await;

    let output = tether(&ns, &["uninstall", "--namespace", &ns.name, "--crds"]);
    assert!(output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("deletes every Application"), "{stderr}");
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    eventually("the Application CRD to be gone", || async {
        crds.get_opt("applications.tether.dev")
            .await
            .ok()
            .filter(Option::is_none)
            .map(|_| ())
    })
    .await;
    // The controller saw the app go without its finalizer: nothing deleted.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let settings: ConfigMap = ns.get("settings").await;
    assert_eq!(settings.data.unwrap()["greeting"], "hello");
}
