//! Argo CD annotations (`tether_core::argocd` decides): objects Argo CD
//! runs only as hooks are set aside, and every annotation Tether does not
//! act on becomes a warning in status (condition `Unsupported`).

use std::sync::Arc;

use tether_core::argocd::{Warning, review};
use tether_source::{Manifest, Rendered};

use super::Pass;

/// `desired` without the objects Argo CD would run only as hooks, and the
/// warnings about every Argo CD annotation Tether does not act on.
pub async fn set_aside(pass: &Pass<'_>, mut desired: Rendered) -> (Rendered, Vec<Warning>) {
    let mut warnings = Vec::new();
    let mut kept: Vec<Manifest> = Vec::with_capacity(desired.manifests.len());
    for manifest in desired.manifests.iter() {
        if !has_argocd_annotation(manifest) {
            kept.push(manifest.clone());
            continue;
        }
        let id = super::identify(&pass.applier, manifest).await;
        let review = review(&id, &manifest.object);
        warnings.extend(review.warnings);
        if !review.withheld {
            kept.push(manifest.clone());
        }
    }
    if kept.len() != desired.manifests.len() {
        desired.manifests = Arc::new(kept);
    }
    (desired, warnings)
}

fn has_argocd_annotation(manifest: &Manifest) -> bool {
    manifest
        .object
        .pointer("/metadata/annotations")
        .and_then(|a| a.as_object())
        .is_some_and(|a| {
            a.keys()
                .any(|key| key.starts_with(tether_core::argocd::PREFIX))
        })
}
