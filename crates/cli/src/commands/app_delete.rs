//! `tether app delete`: delete an Application, saying what it leaves
//! behind — or, with `--cascade`, asking the controller to delete the
//! objects it owns first (the `tether.dev/cascade` finalizer).

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use tether_controller::api::Application;
use tether_controller::api::application::CASCADE_FINALIZER;

/// Objects named in full in the output; the rest are counted.
const NAMED: usize = 10;

/// Deletes Application `name`; with `cascade`, sets the finalizer first.
/// Returns what to tell the user.
pub async fn delete(apps: &Api<Application>, name: &str, cascade: bool) -> anyhow::Result<String> {
    let app = apps.get(name).await?;
    let finalizers = app.metadata.finalizers.clone().unwrap_or_default();
    let cascades = cascade || finalizers.iter().any(|f| f == CASCADE_FINALIZER);
    if cascade && !finalizers.iter().any(|f| f == CASCADE_FINALIZER) {
        let mut finalizers = finalizers;
        finalizers.push(CASCADE_FINALIZER.to_string());
        // With the resourceVersion read: a concurrent change fails rather
        // than losing someone else's finalizer.
        let patch = json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": app.metadata.resource_version,
        }});
        apps.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    apps.delete(name, &DeleteParams::default()).await?;
    let namespace = app.metadata.namespace.as_deref().unwrap_or_default();
    let objects: Vec<String> = app
        .status
        .map(|status| status.inventory)
        .unwrap_or_default()
        .iter()
        .map(|entry| entry.id().to_string())
        .collect();
    Ok(said(namespace, name, cascades, &objects))
}

/// What `app delete` says: what happens to the app's `objects`.
fn said(namespace: &str, name: &str, cascades: bool, objects: &[String]) -> String {
    let app = format!("Application {namespace}/{name}");
    if cascades {
        return format!(
            "{app} deleting: the controller deletes the {} object(s) it owns ({CASCADE_FINALIZER}), then the Application",
            objects.len()
        );
    }
    if objects.is_empty() {
        return format!("{app} deleted");
    }
    let mut listed = objects[..objects.len().min(NAMED)].join(", ");
    if objects.len() > NAMED {
        listed.push_str(&format!(" and {} more", objects.len() - NAMED));
    }
    format!(
        "{app} deleted; left {} object(s) in place: {listed}; use --cascade to delete them",
        objects.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_delete_names_what_it_leaves_behind() {
        let objects = [
            "Deployment web/web".to_string(),
            "ConfigMap web/settings".into(),
        ];
        assert_eq!(
            said("apps", "web", false, &objects),
            "Application apps/web deleted; left 2 object(s) in place: Deployment web/web, \
             ConfigMap web/settings; use --cascade to delete them"
        );
        assert_eq!(
            said("apps", "web", false, &[]),
            "Application apps/web deleted"
        );
    }

    #[test]
    fn a_long_list_is_cut_and_counted() {
        let objects: Vec<String> = (0..12).map(|i| format!("ConfigMap web/c{i}")).collect();
        let text = said("apps", "web", false, &objects);
        assert!(text.contains("c9 and 2 more;"), "{text}");
        assert!(!text.contains("c10"), "{text}");
    }
}
