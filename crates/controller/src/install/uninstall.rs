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
#[error("{object}: {step} failed: {error}")]
pub struct UninstallError {
    pub object: String,
    pub step: &'static str,
    pub error: kube::Error,
}

/// The CRDs `tether install` creates.
pub const CRDS: [&str; 2] = ["applications.tether.dev", "breakglasses.tether.dev"];

/// Removes what `tether install` put in `namespace`, then the shared
/// cluster-wide objects if no install into another namespace is left, and
/// with `crds` the CRDs (every Application with them, never their objects).
/// Returns what was deleted.
pub async fn uninstall(
    client: Client,
    namespace: &str,
    crds: bool,
) -> Result<Vec<ObjectRef>, UninstallError> {
    let mut deleted = Vec::new();
    let installed = ListParams::default().labels(&format!("{INSTALL_NAMESPACE_LABEL}={namespace}"));
    // The controller first, so it stops acting.
    delete(
        &mut deleted,
        Api::<Deployment>::namespaced(client.clone(), namespace),
        SERVICE_ACCOUNT,
    )
    .await?;
    delete(
        &mut deleted,
        Api::<Service>::namespaced(client.clone(), namespace),
        SERVICE_ACCOUNT,
    )
    .await?;
    delete(
        &mut deleted,
        Api::<PodDisruptionBudget>::namespaced(client.clone(), namespace),
        SERVICE_ACCOUNT,
    )
    .await?;
    // Its grants, wherever they are.
    let all = |_: &ClusterRoleBinding| Api::all(client.clone());
    delete_all(&mut deleted, Api::all(client.clone()), &installed, all).await?;
    let within =
        |item: &RoleBinding| Api::namespaced(client.clone(), &item.namespace().unwrap_or_default());
    delete_all(&mut deleted, Api::all(client.clone()), &installed, within).await?;
    let within =
        |item: &Role| Api::namespaced(client.clone(), &item.namespace().unwrap_or_default());
    delete_all(&mut deleted, Api::all(client.clone()), &installed, within).await?;
    for name in [AUDIT_READER_ROLE] {
        delete(
            &mut deleted,
            Api::<RoleBinding>::namespaced(client.clone(), namespace),
            name,
        )
        .await?;
        delete(
            &mut deleted,
            Api::<Role>::namespaced(client.clone(), namespace),
            name,
        )
        .await?;
    }
    delete(
        &mut deleted,
        Api::<ServiceAccount>::namespaced(client.clone(), namespace),
        SERVICE_ACCOUNT,
    )
    .await?;
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
            delete(&mut deleted, Api::<ClusterRole>::all(client.clone()), name).await?;
        }
        delete(
            &mut deleted,
            Api::<ClusterRoleBinding>::all(client.clone()),
            BREAK_GLASS_ROLE,
        )
        .await?;
        for name in [BREAK_GLASS_POLICY, AUDIT_RECORDS_POLICY, PROJECT_POLICY] {
            delete(
                &mut deleted,
                Api::<ValidatingAdmissionPolicyBinding>::all(client.clone()),
                name,
            )
            .await?;
            delete(
                &mut deleted,
                Api::<ValidatingAdmissionPolicy>::all(client.clone()),
                name,
            )
            .await?;
        }
    }
    if crds {
        release_applications(&client).await?;
        for name in CRDS {
            delete(
                &mut deleted,
                Api::<CustomResourceDefinition>::all(client.clone()),
                name,
            )
            .await?;
        }
    }
    Ok(deleted)
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

/// Deletes `name` through `api` unless it is already gone.
async fn delete<K>(
    deleted: &mut Vec<ObjectRef>,
    api: Api<K>,
    name: &str,
) -> Result<(), UninstallError>
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
        Ok(_) => deleted.push(object),
        Err(kube::Error::Api(status)) if status.is_not_found() => {}
        Err(error) => return Err(failed(&object.to_string(), "delete")(error)),
    }
    Ok(())
}

/// Deletes every object `api` lists with `params`, each through the API
/// `api_of` gives for it.
async fn delete_all<K>(
    deleted: &mut Vec<ObjectRef>,
    api: Api<K>,
    params: &ListParams,
    api_of: impl Fn(&K) -> Api<K>,
) -> Result<(), UninstallError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let kind = K::kind(&()).into_owned();
    let listed = api.list(params).await.map_err(failed(&kind, "list"))?;
    for item in listed.items {
        delete(deleted, api_of(&item), &item.name_any()).await?;
    }
    Ok(())
}

fn failed(object: &str, step: &'static str) -> impl FnOnce(kube::Error) -> UninstallError {
    let object = object.to_string();
    move |error| UninstallError {
        object,
        step,
        error,
    }
}
