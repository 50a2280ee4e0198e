//! Pods that really run: a control plane of its own whose kubelet runs the
//! image `tether:dev` as this build's `tether` binary (`kube-local up
//! --exec-image`). A pod of it reaches the API server with in-cluster
//! configuration only — its ServiceAccount's token, the CA and the
//! namespace mounted where Kubernetes mounts them, and
//! KUBERNETES_SERVICE_HOST/PORT — so what it may do is exactly what its
//! ServiceAccount's RBAC grants; a failing container crash-loops.

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use tether_controller::api::Application;
use tether_testkit::{ControlPlane, Launch, client_for, eventually, run_ok, run_ok_with_stdin};

const NAMESPACE: &str = "in-cluster";

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Command {
    let mut command = Command::new("kubectl");
    command.arg("--kubeconfig").arg(kubeconfig).args(args);
    command
}

fn apply(kubeconfig: &Path, objects: &[Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    run_ok_with_stdin(
        &mut kubectl(kubeconfig, &["apply", "-f", "-"]),
        &list.to_string(),
    );
}

/// A pod of `tether:dev` running `tether ARGS` as `account`.
fn tether_pod(name: &str, account: &str, restart: &str, args: &[&str]) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"serviceAccountName": account, "restartPolicy": restart,
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "tether", "image": "tether:dev", "args": args}]}
    })
}

/// The pod's phase and its container's restart count and waiting reason.
async fn state(pods: &Api<Pod>, name: &str) -> Option<(String, i32, Option<String>)> {
    let status = pods.get(name).await.ok()?.status?;
    let container = status.container_statuses?.into_iter().next()?;
    let waiting = container.state?.waiting.and_then(|w| w.reason);
    Some((status.phase?, container.restart_count, waiting))
}

async fn finished(pods: &Api<Pod>, name: &str) -> String {
    eventually(&format!("pod {name} to finish"), || async {
        let (phase, ..) = state(pods, name).await?;
        (phase == "Succeeded" || phase == "Failed").then_some(phase)
    })
    .await
}

#[tokio::test]
async fn a_tether_pod_uses_its_service_account_and_a_failing_one_crash_loops() {
    let dir = tempfile::tempdir().unwrap();
    let plane = ControlPlane::start(
        dir.path(),
        &Launch {
            controller_manager: true,
            show_stderr: true,
            exec_images: vec![("tether:dev".into(), env!("CARGO_BIN_EXE_tether").into())],
            ..Launch::default()
        },
    );
    let admin = plane.kubeconfig();

    // The Application CRD, a reader ServiceAccount allowed to read
    // Applications and pods, and one allowed nothing.
    let client = client_for(admin).await;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &Application::crd())
        .await
        .expect("the Application CRD is created");
    run_ok(&mut kubectl(
        admin,
        &[
            "wait",
            "--for=condition=Established",
            "crd/applications.tether.dev",
        ],
    ));
    apply(
        admin,
        &[
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "reader", "namespace": NAMESPACE}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "nobody", "namespace": NAMESPACE}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "in-cluster-reader"},
                "rules": [
                    {"apiGroups": ["tether.dev"], "resources": ["applications"], "verbs": ["get", "list", "watch"]},
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "reader", "namespace": NAMESPACE},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "in-cluster-reader"},
                "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": NAMESPACE}]}),
        ],
    );

    // Two one-shot pods list Applications with in-cluster configuration,
    // and a pod with a command tether refuses restarts forever.
    let list = ["app", "list", "-n", NAMESPACE, "-o", "json"];
    apply(
        admin,
        &[
            tether_pod("reader", "reader", "Never", &list),
            tether_pod("nobody", "nobody", "Never", &list),
            tether_pod("crasher", "reader", "Always", &["no-such-command"]),
        ],
    );
    let pods: Api<Pod> = Api::namespaced(client, NAMESPACE);
    let logs = |pod: &str| run_ok(&mut kubectl(admin, &["logs", "-n", NAMESPACE, pod]));

    // The reader succeeds through its token; its output is served to
    // kubectl logs.
    let phase = finished(&pods, "reader").await;
    assert_eq!(phase, "Succeeded", "logs:\n{}", logs("reader"));
    assert_eq!(logs("reader").trim(), "[]");

    // The same command as a ServiceAccount without a role is refused by
    // the API server: the pod acts as its ServiceAccount, nothing more.
    let phase = finished(&pods, "nobody").await;
    let refused = logs("nobody");
    assert_eq!(phase, "Failed", "logs:\n{refused}");
    assert!(refused.contains("forbidden"), "logs:\n{refused}");
    assert!(
        refused.contains("system:serviceaccount:in-cluster:nobody"),
        "logs:\n{refused}"
    );

    // The failing container restarts with a back-off, and says why.
    let restarts = eventually(
        "the crasher to be in CrashLoopBackOff after a restart",
        || async {
            let (_, restarts, waiting) = state(&pods, "crasher").await?;
            (waiting.as_deref() == Some("CrashLoopBackOff") && restarts > 0).then_some(restarts)
        },
    )
    .await;
    assert!(restarts > 0);
    assert!(logs("crasher").contains("no-such-command"));

    // Deleting a running pod stops its process and removes it.
    run_ok(&mut kubectl(
        admin,
        &["delete", "pod", "-n", NAMESPACE, "crasher", "--wait=true"],
    ));
    assert!(pods.get_opt("crasher").await.unwrap().is_none());
}
