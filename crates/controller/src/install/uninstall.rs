//! What `tether uninstall` removes: the controller an install put in a
//! namespace, the cluster-wide roles and policies once no other install
//! uses them, and — only when asked — the CRDs.
//!
//! Never removed: the namespace (it holds the Applications, the break-glass
//! audit records and the key that seals them) and the objects Applications
//! applied. Those carry Tether's tracking label and annotation, not an
//! owner reference, so deleting an Application (even by deleting its CRD)
//! does not make the garbage collector delete them; only the cascade
//! finalizer would, and it is taken off every Application before the CRDs go.

use std::fmt::Debug;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::core::NamespaceResourceScope;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tether_core::ObjectRef;

use super::project_policy::PROJECT_POLICY;
use super::rbac::{
    APPLIER_DEFAULT_ROLE, APPLIER_ROLE, INSTALL_NAMESPACE_LABEL, METRICS_READER_ROLE, TENANT_ROLE,
};
use super::{
    AUDIT_READER_ROLE, AUDIT_RECORDS_POLICY, BREAK_GLASS_POLICY, BREAK_GLASS_ROLE, SERVICE_ACCOUNT,
};
use crate::api::Application;

/// Why an uninstall stopped; the object first. Retrying is safe: what is
/// already gone is skipped.
#[derive(Debug, thiserror::Error)]
#[error("{object}: {step} failed: {}", tether_cluster::error::describe(.error))]
pub struct UninstallError {
    pub object: String,
    pub step: &'static str,
    pub error: kube::Error,
}

/// The CRDs `tether install` creates.
pub const CRDS: [&str; 3] = [
    "applications.tether.dev",
    "breakglasses.tether.dev",
    "applicationsets.tether.dev",
];

/// Removes what `tether install` put in `namespace`, then the shared
/// cluster-wide objects if no install into another namespace is left, and
/// with `crds` the CRDs (every Application with them, never their objects).
/// Returns what was deleted.
pub async fn uninstall(
    client: Client,
    namespace: &str,
    crds: bool,
) -> Result<Vec<ObjectRef>, UninstallError> {
    let mut gone = Deleting {
        client: client.clone(),
        namespace,
        deleted: Vec::new(),
    };
    let installed = ListParams::default().labels(&format!("{INSTALL_NAMESPACE_LABEL}={namespace}"));
    // The controller first, so it stops acting.
    gone.local::<Deployment>(SERVICE_ACCOUNT).await?;
    gone.local::<Service>(SERVICE_ACCOUNT).await?;
    gone.local::<PodDisruptionBudget>(SERVICE_ACCOUNT).await?;
    // Its grants, wherever they are.
    let all = |_: &ClusterRoleBinding| Api::all(client.clone());
    gone.delete_all(&installed, all).await?;
    let within =
        |item: &RoleBinding| Api::namespaced(client.clone(), &item.namespace().unwrap_or_default());
    gone.delete_all(&installed, within).await?;
    let within =
        |item: &Role| Api::namespaced(client.clone(), &item.namespace().unwrap_or_default());
    gone.delete_all(&installed, within).await?;
    gone.local::<RoleBinding>(AUDIT_READER_ROLE).await?;
    gone.local::<Role>(AUDIT_READER_ROLE).await?;
    gone.local::<ServiceAccount>(SERVICE_ACCOUNT).await?;
    // The shared roles and policies, when this was the last install.
    if !other_installs(&client).await? {
        for name in [
            SERVICE_ACCOUNT,
            APPLIER_ROLE,
            APPLIER_DEFAULT_ROLE,
            BREAK_GLASS_ROLE,
            METRICS_READER_ROLE,
            TENANT_ROLE,
            "tether-view",
        ] {
            gone.cluster::<ClusterRole>(name).await?;
        }
        gone.cluster::<ClusterRoleBinding>(BREAK_GLASS_ROLE).await?;
        for name in [
            BREAK_GLASS_POLICY,
            AUDIT_RECORDS_POLICY,
            PROJECT_POLICY,
            super::pin_policy::PIN_POLICY,
        ] {
            gone.cluster::<ValidatingAdmissionPolicyBinding>(name)
                .await?;
            gone.cluster::<ValidatingAdmissionPolicy>(name).await?;
        }
    }
    if crds {
        release_applications(&client).await?;
        for name in CRDS {
            gone.cluster::<CustomResourceDefinition>(name).await?;
        }
    }
    Ok(gone.deleted)
}

/// Whether a controller installed into some namespace is still bound.
async fn other_installs(client: &Client) -> Result<bool, UninstallError> {
    let bindings = Api::<ClusterRoleBinding>::all(client.clone())
        .list(&ListParams::default().labels(INSTALL_NAMESPACE_LABEL))
        .await
        .map_err(failed("ClusterRoleBindings", "list"))?;
    Ok(bindings
        .items
        .iter()
        .any(|b| b.role_ref.name == SERVICE_ACCOUNT))
}

/// Takes every finalizer off every Application, so deleting the CRD
/// deletes them without the cascade (which would delete their objects).
async fn release_applications(client: &Client) -> Result<(), UninstallError> {
    let all = Api::<Application>::all(client.clone());
    let apps = match all.list(&ListParams::default()).await {
        Ok(apps) => apps,
        Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(()),
        Err(error) => return Err(failed("Applications", "list")(error)),
    };
    for app in apps.items.iter().filter(|app| !app.finalizers().is_empty()) {
        let api =
            Api::<Application>::namespaced(client.clone(), &app.namespace().unwrap_or_default());
        let patch = serde_json::json!({"metadata": {"finalizers": null}});
        api.patch(
            &app.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(failed(
            &format!(
                "Application {}/{}",
                app.namespace().unwrap_or_default(),
                app.name_any()
            ),
            "removing its finalizers",
        ))?;
    }
    Ok(())
}

/// What an uninstall has deleted so far, the client it deletes with and
/// the namespace of the install.
struct Deleting<'a> {
    client: Client,
    namespace: &'a str,
    deleted: Vec<ObjectRef>,
}

impl Deleting<'_> {
    /// Deletes `name` of kind `K` in the install's namespace, unless it is
    /// already gone.
    async fn local<K>(&mut self, name: &str) -> Result<(), UninstallError>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Debug,
    {
        let api = Api::<K>::namespaced(self.client.clone(), self.namespace);
        self.delete(api, name).await
    }

    /// Deletes cluster-wide `name` of kind `K`, unless it is already gone.
    async fn cluster<K>(&mut self, name: &str) -> Result<(), UninstallError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        self.delete(Api::<K>::all(self.client.clone()), name).await
    }

    /// Deletes every object of kind `K` listed everywhere with `params`,
    /// each through the API `api_of` gives for it.
    async fn delete_all<K>(
        &mut self,
        params: &ListParams,
        api_of: impl Fn(&K) -> Api<K>,
    ) -> Result<(), UninstallError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let kind = K::kind(&()).into_owned();
        let listed = Api::<K>::all(self.client.clone())
            .list(params)
            .await
            .map_err(failed(&kind, "list"))?;
        for item in listed.items {
            self.delete(api_of(&item), &item.name_any()).await?;
        }
        Ok(())
    }

    /// Deletes `name` through `api` unless it is already gone.
    async fn delete<K>(&mut self, api: Api<K>, name: &str) -> Result<(), UninstallError>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    {
        let object = ObjectRef {
            group: K::group(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            namespace: api.namespace().map(str::to_string),
            name: name.to_string(),
        };
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => self.deleted.push(object),
            Err(kube::Error::Api(status)) if status.is_not_found() => {}
            Err(error) => return Err(failed(&object.to_string(), "delete")(error)),
        }
        Ok(())
    }
}

fn failed(object: &str, step: &'static str) -> impl FnOnce(kube::Error) -> UninstallError {
    let object = object.to_string();
    move |error| UninstallError {
        object,
        step,
        error,
    }
}
