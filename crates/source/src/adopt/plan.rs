//! What the renderer-specific writers share: one planned object, and the
//! render of a checkout that a write is checked against.

use std::path::Path;

use tether_core::ObjectRef;

use super::AdoptError;
use super::yaml::FieldEdit;
use crate::files::Files;
use crate::manifest::Manifest;
use crate::render::{Sandbox, render};
use crate::spec::Source;

/// One object to write: where the render found it, and its fields as
/// selectors with their new values.
pub(crate) struct Planned<'m> {
    pub object: &'m ObjectRef,
    pub manifest: &'m Manifest,
    pub fields: Vec<FieldEdit>,
}

/// The source's objects as rendered from a checkout.
pub(crate) fn render_checkout(
    root: &Path,
    source: &Source,
    sandbox: &Sandbox,
) -> Result<Vec<Manifest>, AdoptError> {
    let files = Files::read_dir(root).map_err(crate::render::RenderError::from)?;
    // Helm's defaults: adopting does not know the cluster's capabilities yet.
    let capabilities = crate::render::Capabilities::default();
    Ok(render(
        &source.renderer,
        &files,
        &source.path,
        sandbox,
        &capabilities,
    )?)
}
