//! Tether's own objects in a test: an Application fixture, waiting for its
//! status, and its conditions.

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};
use tether_controller::api::application::{self, Condition};
use tether_controller::api::{Application, ApplicationStatus};
use tether_core::ConditionStatus;

use crate::object_where;

/// An Application manifest, built up field by field and applied
/// server-side as field manager `test`.
///
/// ```ignore
/// let apps = application("shop", &ns.name, &repo.url(), "app")
///     .sync_policy(json!({"prune": true}))
///     .apply(&ns.client)
///     .await;
/// ```
#[derive(Clone, Debug)]
pub struct AppFixture {
    manifest: Value,
}

/// Application `name` in `namespace` for `path` of the repository at
/// `repo_url`, deploying to its own namespace.
pub fn application(name: &str, namespace: &str, repo_url: &str, path: &str) -> AppFixture {
    AppFixture {
        manifest: json!({"apiVersion": "tether.dev/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"source": {"repoURL": repo_url, "path": path},
                     "destination": {"namespace": namespace}}}),
    }
}

impl AppFixture {
    /// `spec.syncPolicy`.
    pub fn sync_policy(mut self, policy: Value) -> AppFixture {
        self.manifest["spec"]["syncPolicy"] = policy;
        self
    }

    /// `spec.destination.namespace` (default: the Application's own).
    pub fn destination(mut self, namespace: &str) -> AppFixture {
        self.manifest["spec"]["destination"]["namespace"] = json!(namespace);
        self
    }

    /// `spec.destination.cluster`: a registered cluster.
    pub fn cluster(mut self, name: &str) -> AppFixture {
        self.manifest["spec"]["destination"]["cluster"] = json!(name);
        self
    }

    /// `spec.source.renderer`.
    pub fn renderer(mut self, renderer: Value) -> AppFixture {
        self.manifest["spec"]["source"]["renderer"] = renderer;
        self
    }

    /// `spec.source.secretRef`: the repository's credentials.
    pub fn secret_ref(mut self, secret: &str) -> AppFixture {
        self.manifest["spec"]["source"]["secretRef"] = json!({ "name": secret });
        self
    }

    /// `spec.source.chart` and `version`: the source is that chart of the
    /// Helm repository or OCI path at the fixture's URL (`insecure` for an
    /// `oci://` one: the test registry speaks plain HTTP).
    pub fn chart(mut self, chart: &str, version: &str) -> AppFixture {
        let source = &mut self.manifest["spec"]["source"];
        source["chart"] = json!(chart);
        source["version"] = json!(version);
        if source["repoURL"]
            .as_str()
            .is_some_and(|url| url.starts_with("oci://"))
        {
            source["insecure"] = json!(true);
        }
        self
    }

    /// `spec.source.interval`: how often its repository is polled.
    pub fn interval(mut self, interval: &str) -> AppFixture {
        self.manifest["spec"]["source"]["interval"] = json!(interval);
        self
    }

    /// `spec.serviceAccountName`: the ServiceAccount of the Application's
    /// namespace its changes are made as.
    pub fn service_account(mut self, name: &str) -> AppFixture {
        self.manifest["spec"]["serviceAccountName"] = json!(name);
        self
    }

    /// A label on the Application.
    pub fn label(mut self, key: &str, value: &str) -> AppFixture {
        self.manifest["metadata"]["labels"][key] = json!(value);
        self
    }

    /// The manifest as it stands.
    pub fn manifest(&self) -> &Value {
        &self.manifest
    }

    /// Creates (or updates) the Application; returns the Applications of
    /// its namespace.
    pub async fn apply(&self, client: &Client) -> Api<Application> {
        let metadata = &self.manifest["metadata"];
        let (name, namespace) = (
            metadata["name"].as_str().expect("a name"),
            metadata["namespace"].as_str().expect("a namespace"),
        );
        let apps: Api<Application> = Api::namespaced(client.clone(), namespace);
        apps.patch(
            name,
            &PatchParams::apply("test"),
            &Patch::Apply(&self.manifest),
        )
        .await
        .unwrap_or_else(|error| panic!("applying Application {namespace}/{name}: {error}"));
        apps
    }
}

/// The status of Application `name` once `check` holds (see [`object_where`]).
pub async fn status_of(
    apps: &Api<Application>,
    name: &str,
    what: &str,
    check: impl Fn(&ApplicationStatus) -> bool,
) -> ApplicationStatus {
    let app = object_where(apps, name, what, |app| {
        app.status.as_ref().is_some_and(&check)
    })
    .await;
    app.status.expect("checked above")
}

/// The status of Application `shop` once `check` holds.
pub async fn status_where(
    apps: &Api<Application>,
    what: &str,
    check: impl Fn(&ApplicationStatus) -> bool,
) -> ApplicationStatus {
    status_of(apps, "shop", what, check).await
}

/// The condition of `type_` in `status`, if there is one.
pub fn condition<'a>(status: &'a ApplicationStatus, type_: &str) -> Option<&'a Condition> {
    application::condition(&status.conditions, type_)
}

/// Whether `status` has a condition of `type_` with status `value`.
pub fn has_condition(status: &ApplicationStatus, type_: &str, value: ConditionStatus) -> bool {
    application::condition_with(&status.conditions, type_, value).is_some()
}
