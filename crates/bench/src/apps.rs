//! The benchmark's Applications and namespaces: creating them, waiting
//! for them to be Synced (or Healthy), and deleting them.

use std::fmt::Debug;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde::de::DeserializeOwned;
use serde_json::json;
use tether_controller::api::Application;
use tether_testkit::application;

/// One set of `n` benchmark Applications: `app-000`… in namespaces
/// `PREFIX-000`…, each syncing `apps/app-NNN` of the bench repository and
/// labelled `bench=LABEL`, so the set can be waited for and deleted alone;
/// each naming `service_account` (of its namespace) in
/// `spec.serviceAccountName` when given.
pub struct AppSet {
    pub prefix: String,
    pub label: String,
    pub n: usize,
    pub service_account: Option<String>,
}

impl AppSet {
    pub fn namespace(&self, i: usize) -> String {
        format!("{}-{i:03}", self.prefix)
    }

    pub fn namespaces(&self) -> Vec<String> {
        (0..self.n).map(|i| self.namespace(i)).collect()
    }

    /// The label selector of the set's Applications.
    pub fn selector(&self) -> String {
        format!("bench={}", self.label)
    }
}

pub fn app_name(i: usize) -> String {
    format!("app-{i:03}")
}

/// Server-side applies `object` as `name` through `api`, as field manager
/// `bench`.
pub async fn apply<K>(api: &Api<K>, name: &str, object: &serde_json::Value) -> kube::Result<K>
where
    K: Clone + DeserializeOwned + Debug,
{
    api.patch(name, &PatchParams::apply("bench"), &Patch::Apply(object))
        .await
}

/// Runs `requests`, at most `concurrency` at a time; the first error stops
/// them.
pub async fn run_all<T>(
    concurrency: usize,
    requests: impl Iterator<Item = impl Future<Output = anyhow::Result<T>>>,
) -> anyhow::Result<()> {
    futures::stream::iter(requests)
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(())
}

pub async fn create_namespaces(admin: &kube::Client, names: &[String]) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(admin.clone());
    run_all(
        16,
        names.iter().map(|name| {
            let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            let api = &api;
            async move {
                let applied = apply(api, name, &ns).await;
                applied.with_context(|| format!("namespace {name}"))
            }
        }),
    )
    .await
}

pub async fn create_apps(admin: &kube::Client, repo_url: &str, set: &AppSet) -> anyhow::Result<()> {
    run_all(
        8,
        (0..set.n).map(|i| {
            let ns = set.namespace(i);
            let name = app_name(i);
            let mut app = application(&name, &ns, repo_url, &format!("apps/{name}"))
                .label("bench", &set.label);
            if let Some(account) = &set.service_account {
                app = app.service_account(account);
            }
            let api: Api<Application> = Api::namespaced(admin.clone(), &ns);
            async move {
                let applied = apply(&api, &name, app.manifest()).await;
                applied.with_context(|| format!("Application {ns}/{name}"))
            }
        }),
    )
    .await
}

/// Makes the set's ServiceAccount in each of its namespaces and binds it
/// there to ClusterRole `role` (nothing when the set names none).
pub async fn bind_service_accounts(
    admin: &kube::Client,
    set: &AppSet,
    role: &str,
) -> anyhow::Result<()> {
    let Some(account) = &set.service_account else {
        return Ok(());
    };
    let binding = format!("{account}-{role}");
    run_all(
        16,
        set.namespaces().into_iter().map(|ns| {
            let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), &ns);
            let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), &ns);
            let service_account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": account}});
            let role_binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding", "metadata": {"name": binding},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]});
            let binding = &binding;
            async move {
                let made = apply(&accounts, account, &service_account).await;
                made.with_context(|| format!("ServiceAccount {ns}/{account}"))?;
                let bound = apply(&bindings, binding, &role_binding).await;
                bound.with_context(|| format!("RoleBinding {ns}/{binding}"))
            }
        }),
    )
    .await
}

/// Deletes the set's Applications (not their objects: the benchmark's
/// Applications carry no cascade finalizer) and waits until they are gone,
/// so the next controller started does not see them.
pub async fn delete_apps(admin: &kube::Client, set: &AppSet) -> anyhow::Result<()> {
    run_all(
        16,
        (0..set.n).map(|i| {
            let ns = set.namespace(i);
            let name = app_name(i);
            let api: Api<Application> = Api::namespaced(admin.clone(), &ns);
            async move {
                match api.delete(&name, &DeleteParams::default()).await {
                    Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                    deleted => deleted
                        .map(drop)
                        .with_context(|| format!("Application {ns}/{name}")),
                }
            }
        }),
    )
    .await?;
    let apps: Api<Application> = Api::all(admin.clone());
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let left = apps
            .list(&ListParams::default().labels(&set.selector()))
            .await?
            .items
            .len();
        if left == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{} Applications {}: still there 2 min after deletion",
                left,
                set.selector()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Polls until `n` Applications matching `selector` are Synced at `revision`.
pub async fn wait_synced(
    admin: &kube::Client,
    selector: &str,
    n: usize,
    revision: &str,
) -> anyhow::Result<()> {
    wait_apps(admin, selector, n, |a| synced_at(a, revision)).await
}

/// Polls until `n` Applications matching `selector` are Synced at
/// `revision` and Healthy (their Deployments rolled out).
pub async fn wait_healthy(
    admin: &kube::Client,
    selector: &str,
    n: usize,
    revision: &str,
) -> anyhow::Result<()> {
    wait_apps(admin, selector, n, |a| {
        synced_at(a, revision)
            && a.status
                .as_ref()
                .is_some_and(|s| s.health.status == tether_core::HealthStatus::Healthy)
    })
    .await
}

/// Polls until `n` Applications matching `selector` satisfy `done`.
async fn wait_apps(
    admin: &kube::Client,
    selector: &str,
    n: usize,
    done: impl Fn(&Application) -> bool,
) -> anyhow::Result<()> {
    let apps: Api<Application> = Api::all(admin.clone());
    let deadline = Instant::now() + Duration::from_secs(1800);
    loop {
        let list = apps.list(&ListParams::default().labels(selector)).await?;
        let synced = list.items.iter().filter(|a| done(a)).count();
        if synced >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("Applications {selector}: only {synced}/{n} ready after 30 min");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn synced_at(app: &Application, revision: &str) -> bool {
    app.status.as_ref().is_some_and(|s| {
        s.sync.status == tether_core::SyncStatus::Synced
            && s.sync.revision.as_deref() == Some(revision)
    })
}
