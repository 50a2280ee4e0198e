//! Many teams on one cluster: an Application's changes are made as its
//! ServiceAccount (Kubernetes impersonation), so RBAC decides what a
//! tenant may change; a commit reaching beyond those rights is refused
//! whole, naming the object and the missing permission; a locked-down
//! controller never applies with its own rights; a Project confines the
//! repositories, namespaces and kinds of the apps it holds.

mod support;

use kube::api::Api;
use serde_json::{Value, json};
use support::tenancy::{Project, cluster_role_binding, config_map_in, refused, service_account};
use support::{Repo, Running, config_map, installed, settings_repo_greeting, tether_ok};
use tether_controller::api::Application;
use tether_controller::api::application::RECONCILED_CONDITION;
use tether_core::ConditionStatus;
use tether_core::SyncStatus;
use tether_testkit::{TestNamespace, application, condition, eventually, has_condition, status_of};

/// Tether installed in `ns`, and `tether run` for `ns` with `more`
/// arguments.
fn run_controller_with(ns: &TestNamespace, identity: &str, more: &[&str]) -> Running {
    tether_ok(ns, &["install", "--namespace", &ns.name]);
    support::run_controller_with(ns, ns, identity, 30, more)
}

/// Application `shop` of `ns` for `repo`'s `app/`, polled every second.
fn create_app(ns: &TestNamespace, repo: &Repo, spec: Value) {
    let mut app = application("shop", &ns.name, &repo.url(), "app")
        .interval("1s")
        .sync_policy(json!({"automated": true}))
        .manifest()
        .clone();
    for (key, value) in spec.as_object().unwrap() {
        app["spec"][key] = value.clone();
    }
    ns.kubectl_ok_with_stdin(&["apply", "-f", "-"], &app.to_string());
}

/// `settings`' greeting in `ns`.
fn greeting(ns: &TestNamespace) -> String {
    ns.jsonpath("configmap/settings", "{.data.greeting}")
}

/// Whether `kubectl get ARGS` finds the object.
fn exists(ns: &TestNamespace, args: &[&str]) -> bool {
    let mut command = vec!["get"];
    command.extend_from_slice(args);
    ns.kubectl(&command).status.success()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_app_applies_as_its_service_account_and_a_commit_beyond_its_rights_is_refused_whole() {
    let team_a = TestNamespace::create("team-a").await;
    let team_b = TestNamespace::create("team-b").await;
    service_account(&team_a, "deployer", "edit");
    let (repo, first) = settings_repo_greeting("one");
    let _controller = run_controller_with(&team_a, "tenancy", &[]);
    create_app(
        &team_a,
        &repo,
        json!({"serviceAccountName": "deployer",
               "destination": {"namespace": team_a.name, "allowNamespaces": [team_b.name]}}),
    );
    let apps: Api<Application> = team_a.api();
    let deployer = format!("system:serviceaccount:{}:deployer", team_a.name);
    status_of(&apps, "shop", "Synced as deployer", |s| {
        s.sync.status == SyncStatus::Synced
            && s.sync.revision.as_deref() == Some(first.as_str())
            && s.applies_as.as_deref() == Some(deployer.as_str())
    })
    .await;
    assert_eq!(greeting(&team_a), "one");
    let shown = tether_ok(&team_a, &["status", "shop", "-n", &team_a.name]);
    assert!(
        shown
            .lines()
            .any(|line| line.starts_with("Applies as:") && line.ends_with(&deployer)),
        "{shown}"
    );

    // A ClusterRoleBinding: `edit` in team-a grants no cluster-scoped RBAC.
    let binding = format!("escalate-{}", team_a.name);
    repo.commit(
        &[
            ("app/settings.yaml", config_map("settings", "two")),
            (
                "app/binding.yaml",
                cluster_role_binding(&binding, &team_a.name),
            ),
        ],
        "two, and cluster-admin for deployer",
    );
    let (message, synced) = refused(&apps, "ValidationFailed").await;
    println!("a ClusterRoleBinding: {message}");
    assert!(
        message.contains(&format!("ClusterRoleBinding {binding}")),
        "{message}"
    );
    assert!(message.contains("forbidden"), "{message}");
    assert!(
        message.contains(&format!("system:serviceaccount:{}:deployer", team_a.name)),
        "{message}"
    );
    assert_eq!(synced.as_deref(), Some(first.as_str()));
    assert_eq!(greeting(&team_a), "one", "nothing of the commit applied");
    assert!(!exists(&team_a, &["clusterrolebinding", &binding]));

    // An object in team-b, which the destination allows but deployer's
    // rights do not reach.
    repo.git(&["rm", "-q", "app/binding.yaml"]);
    repo.commit(
        &[
            ("app/settings.yaml", config_map("settings", "three")),
            ("app/other.yaml", config_map_in("intruder", &team_b.name)),
        ],
        "three, and a ConfigMap in team-b",
    );
    let status = status_of(&apps, "shop", "refused for team-b", |s| {
        condition(s, RECONCILED_CONDITION).is_some_and(|c| {
            c.status == "False"
                && c.message
                    .contains(&format!("ConfigMap {}/intruder", team_b.name))
        })
    })
    .await;
    let message = &condition(&status, RECONCILED_CONDITION).unwrap().message;
    println!("an object in team-b: {message}");
    assert!(message.contains("forbidden"), "{message}");
    assert_eq!(greeting(&team_a), "one", "nothing of the commit applied");
    assert!(!exists(&team_b, &["configmap", "intruder"]));

    // Back within its rights: it syncs.
    repo.git(&["rm", "-q", "app/other.yaml"]);
    let fixed = repo.commit(
        &[("app/settings.yaml", config_map("settings", "four"))],
        "four",
    );
    status_of(&apps, "shop", "Synced again", |s| {
        s.sync.revision.as_deref() == Some(fixed.as_str())
            && has_condition(s, RECONCILED_CONDITION, ConditionStatus::True)
    })
    .await;
    assert_eq!(greeting(&team_a), "four");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_locked_down_controller_refuses_an_app_without_a_service_account_and_applies_nothing() {
    let ns = TestNamespace::create("lockdown").await;
    let (repo, _) = settings_repo_greeting("one");
    let _controller = run_controller_with(&ns, "lockdown", &["--require-service-account"]);
    create_app(&ns, &repo, json!({}));
    let apps: Api<Application> = ns.api();
    let (message, synced) = refused(&apps, "ServiceAccountRequired").await;
    println!("locked down: {message}");
    assert!(
        message.contains("spec.serviceAccountName is required"),
        "{message}"
    );
    assert_eq!(synced, None);
    assert!(!exists(&ns, &["configmap", "settings"]), "nothing applied");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_default_service_account_applies_with_its_own_rights_only() {
    let ns = TestNamespace::create("default-sa").await;
    // `limited` may write ConfigMaps in its namespace, nothing else.
    ns.kubectl_ok(&[
        "create",
        "role",
        "configmaps-only",
        "--verb=get,list,watch,create,update,patch,delete",
        "--resource=configmaps",
    ]);
    ns.kubectl_ok(&["create", "serviceaccount", "limited"]);
    ns.kubectl_ok(&[
        "create",
        "rolebinding",
        "limited",
        "--role",
        "configmaps-only",
        "--serviceaccount",
        &format!("{}:limited", ns.name),
    ]);
    let (repo, first) = settings_repo_greeting("one");
    let _controller = run_controller_with(
        &ns,
        "default-sa",
        &[
            "--require-service-account",
            "--default-service-account",
            "limited",
        ],
    );
    create_app(&ns, &repo, json!({}));
    let apps: Api<Application> = ns.api();
    status_of(&apps, "shop", "Synced as limited", |s| {
        s.sync.status == SyncStatus::Synced && s.sync.revision.as_deref() == Some(first.as_str())
    })
    .await;
    assert_eq!(greeting(&ns), "one");

    // A Service is beyond `limited`'s rights, though not the controller's.
    let service =
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n    - port: 80\n";
    repo.commit(
        &[
            ("app/settings.yaml", config_map("settings", "two")),
            ("app/service.yaml", service.to_string()),
        ],
        "two, and a Service",
    );
    let (message, synced) = refused(&apps, "ValidationFailed").await;
    println!("beyond the default account's rights: {message}");
    assert!(
        message.contains(&format!("Service {}/web", ns.name)),
        "{message}"
    );
    assert!(
        message.contains(&format!("system:serviceaccount:{}:limited", ns.name)),
        "{message}"
    );
    assert_eq!(synced.as_deref(), Some(first.as_str()));
    assert_eq!(greeting(&ns), "one", "nothing of the commit applied");
    assert!(!exists(&ns, &["service", "web"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_refuses_cluster_scoped_kinds_and_other_namespaces_and_applies_nothing() {
    let ns = TestNamespace::create("proj-kinds").await;
    let other = TestNamespace::create("proj-other").await;
    let (repo, first) = settings_repo_greeting("one");
    // The controller's own identity (no ServiceAccount): only the Project
    // stands between the commit and the cluster.
    let _controller = run_controller_with(&ns, "projects", &[]);
    let _project = Project::apply(
        &ns,
        &ns.name,
        json!({"applicationNamespaces": [ns.name], "sourceRepos": ["file://**"],
               "allowFileSources": true}),
    );
    create_app(
        &ns,
        &repo,
        json!({"destination": {"namespace": ns.name, "allowNamespaces": [other.name]}}),
    );
    let apps: Api<Application> = ns.api();
    status_of(&apps, "shop", "Synced in its project", |s| {
        s.sync.revision.as_deref() == Some(first.as_str())
            && s.project.as_deref() == Some(ns.name.as_str())
    })
    .await;
    let shown = tether_ok(&ns, &["status", "shop", "-n", &ns.name]);
    assert!(
        shown
            .lines()
            .any(|line| line.starts_with("Project:") && line.ends_with(&ns.name)),
        "{shown}"
    );

    let binding = format!("escalate-{}", ns.name);
    repo.commit(
        &[
            ("app/settings.yaml", config_map("settings", "two")),
            ("app/binding.yaml", cluster_role_binding(&binding, &ns.name)),
            ("app/other.yaml", config_map_in("intruder", &other.name)),
        ],
        "two, cluster-admin, and a ConfigMap elsewhere",
    );
    let (message, synced) = refused(&apps, "ProjectViolation").await;
    println!("outside the project: {message}");
    assert!(
        message.contains(&format!(
            "ClusterRoleBinding {binding}: cluster-scoped kind \
             rbac.authorization.k8s.io/ClusterRoleBinding is not allowed by Project {} \
             (clusterResources.allow: none)",
            ns.name
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "ConfigMap {}/intruder: namespace {} is not allowed by Project {}",
            other.name, other.name, ns.name
        )),
        "{message}"
    );
    assert_eq!(synced.as_deref(), Some(first.as_str()));
    assert_eq!(greeting(&ns), "one", "nothing of the commit applied");
    assert!(!exists(&ns, &["clusterrolebinding", &binding]));
    assert!(!exists(&other, &["configmap", "intruder"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_refuses_at_admission_an_app_whose_repository_or_destination_it_does_not_allow() {
    let ns = installed("proj-admit").await;
    let _project = Project::apply(
        &ns,
        &ns.name,
        json!({"applicationNamespaces": [ns.name],
               "sourceRepos": ["https://git.example/team-a/*"]}),
    );
    let app = |repo: &str, destination: &str| {
        let mut app = application("shop", &ns.name, repo, "app")
            .manifest()
            .clone();
        app["spec"]["destination"]["namespace"] = json!(destination);
        ns.kubectl_with_stdin(&["apply", "-f", "-"], &app.to_string())
    };
    // The admission policy reads Projects from the API server's own
    // cache, which learns of a new Project a moment after it is created.
    let refused = eventually("the new Project in force at admission", || async {
        let answer = app("https://git.example/team-b/shop", &ns.name);
        (!answer.status.success()).then_some(answer)
    })
    .await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    println!("another repository: {stderr}");
    assert!(
        stderr.contains(&format!(
            "Application {}/shop: repository https://git.example/team-b/shop is not allowed by \
             Project {} (sourceRepos: https://git.example/team-a/*)",
            ns.name, ns.name
        )),
        "{stderr}"
    );
    let refused = app("file:///var/cache/tether/repositories/x.git", &ns.name);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("allowFileSources: false"), "{stderr}");
    let refused = app("https://git.example/team-a/shop", "kube-system");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("destination namespace kube-system is not allowed"),
        "{stderr}"
    );
    assert!(
        app("https://git.example/team-a/shop", &ns.name)
            .status
            .success()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_claiming_an_apps_namespace_stops_it_reading_the_controllers_file_system() {
    let ns = TestNamespace::create("proj-local").await;
    let (repo, first) = settings_repo_greeting("one");
    let _controller = run_controller_with(&ns, "proj-local", &[]);
    // No Project claims the namespace yet: unrestricted, as before Projects.
    create_app(&ns, &repo, json!({}));
    let apps: Api<Application> = ns.api();
    status_of(&apps, "shop", "Synced without a project", |s| {
        s.sync.revision.as_deref() == Some(first.as_str())
    })
    .await;
    // A Project claims it; local repositories are off by default. The app
    // is judged again at once, and the next commit is never fetched.
    let _project = Project::apply(
        &ns,
        &ns.name,
        json!({"applicationNamespaces": [ns.name], "sourceRepos": ["**"]}),
    );
    let (message, _) = refused(&apps, "ProjectViolation").await;
    println!("a local repository: {message}");
    assert!(
        message.contains(&format!(
            "is on the controller's file system, which Project {} does not allow \
             (allowFileSources: false)",
            ns.name
        )),
        "{message}"
    );
    repo.commit(
        &[("app/settings.yaml", config_map("settings", "two"))],
        "two",
    );
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert_eq!(greeting(&ns), "one", "nothing fetched or applied");
}
