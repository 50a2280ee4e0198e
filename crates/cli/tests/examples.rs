//! A newcomer's first hour: every example repository in
//! `examples/first-hour` (the common public layouts: plain YAML, Kustomize
//! base and overlay, Helm with values files and a kubeVersion constraint,
//! Helm with a vendored dependency, Jsonnet with top-level arguments, Argo
//! CD sync waves and a hook, app-of-apps, a 30-object microservices demo)
//! reaches Synced and Healthy from `tether app create` with the renderer
//! detected and no namespace made by hand; the hook runs before the sync.

mod support;

use std::path::Path;
use std::time::Instant;

use kube::api::Api;
use support::{Repo, converged, run_controller, tether_ok};
use tether_controller::api::Application;
use tether_testkit::{TestNamespace, status_of};

/// Every file under `dir`, as (path relative to `dir`, text).
fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                files.push((relative, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    files
}

/// One example: the app's name, its path in the repository and the flags
/// beyond the common ones.
struct Example {
    name: &'static str,
    path: &'static str,
    flags: &'static [&'static str],
}

const EXAMPLES: [Example; 9] = [
    Example {
        name: "guestbook",
        path: "guestbook",
        flags: &[],
    },
    Example {
        name: "kustomize",
        path: "kustomize-guestbook/overlays/staging",
        flags: &[],
    },
    Example {
        name: "helm",
        path: "helm-guestbook",
        flags: &["--helm-values", "values-production.yaml"],
    },
    Example {
        name: "helm-dependency",
        path: "helm-dependency",
        flags: &[],
    },
    Example {
        name: "jsonnet",
        path: "jsonnet-guestbook",
        flags: &["--jsonnet-tla", "name=guestbook"],
    },
    Example {
        name: "waves",
        path: "sync-waves",
        flags: &[],
    },
    Example {
        name: "hooks",
        path: "hooks",
        flags: &[],
    },
    Example {
        name: "apps",
        path: "app-of-apps/apps",
        flags: &[],
    },
    Example {
        name: "microservices",
        path: "microservices-demo",
        flags: &[],
    },
];

#[tokio::test(flavor = "multi_thread")]
async fn every_first_hour_example_reaches_synced_and_healthy_from_app_create() {
    let ns = TestNamespace::create("first-hour").await;
    let n = ns.name.clone();
    let repo = Repo::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/first-hour");
    let url = repo.url();
    let files: Vec<(String, String)> = files_under(&examples)
        .into_iter()
        .map(|(path, text)| {
            let text = text
                .replace("REPO_URL", &url)
                .replace("CHILD_NAMESPACE", &n);
            (path, text)
        })
        .collect();
    repo.commit(&files, "the first-hour examples");
    tether_ok(&ns, &["install", "-n", &n]);
    let _controller = run_controller(&ns, "first-hour");

    // Created one after another, then awaited together.
    let mut started = Vec::new();
    for example in &EXAMPLES {
        // The app-of-apps puts its Applications where the controller
        // watches them; every other app gets a namespace of its own.
        let destination = match example.name {
            "apps" => n.clone(),
            name => format!("{n}-{name}"),
        };
        let mut args = vec![
            "app",
            "create",
            example.name,
            "-n",
            &n,
            "--repo",
            &url,
            "--path",
            example.path,
            "--dest-namespace",
            &destination,
        ];
        if example.name != "apps" {
            args.push("--create-namespace");
        }
        args.extend(example.flags);
        tether_ok(&ns, &args);
        started.push(Instant::now());
    }
    let apps: Api<Application> = Api::namespaced(ns.client.clone(), &n);
    let mut figures = Vec::new();
    for (example, started) in EXAMPLES.iter().zip(&started) {
        let status = status_of(&apps, example.name, "Synced and Healthy", converged).await;
        figures.push(format!(
            "{:<16} {:>6.1} s",
            example.name,
            started.elapsed().as_secs_f64()
        ));
        if example.name == "hooks" {
            // The PreSync hook ran before the sync (and was deleted).
            let hooks = &status.history[0].hooks;
            assert!(
                hooks.iter().any(|h| h.name.contains("/db-migrate-")
                    && h.outcome == tether_core::hook::HookOutcome::Succeeded),
                "{hooks:?}"
            );
        }
        if example.name == "microservices" {
            assert_eq!(status.resource_count.unwrap_or(status.resources.len()), 30);
        }
    }
    // The children of the app-of-apps.
    for child in ["child-guestbook", "child-sync-waves"] {
        status_of(&apps, child, "the child Synced and Healthy", converged).await;
    }
    println!(
        "create -> Synced and Healthy (all created at once):\n{}",
        figures.join("\n")
    );

    // The namespaces Tether created outlive the test namespace: remove them.
    let mut made: Vec<String> = EXAMPLES.iter().map(|e| format!("{n}-{}", e.name)).collect();
    made.extend([format!("{n}-child-guestbook"), format!("{n}-child-waves")]);
    for namespace in made {
        let _ = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&ns.kubeconfig)
            .args([
                "delete",
                "namespace",
                &namespace,
                "--wait=false",
                "--ignore-not-found",
            ])
            .output();
    }
}
