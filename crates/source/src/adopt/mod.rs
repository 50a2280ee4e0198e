//! `tether adopt`: writing the live values of drifted fields back into Git.
//!
//! [`adopt`] is the whole story: clone the tracked branch, write the
//! fields, check that the source now renders to the live values, commit as
//! the operator, push. Its parts, one job each:
//!
//! - [`path`] reads a drifted field's dotted path back into steps.
//! - [`yaml`] edits one object of a plain manifest file in place, keeping
//!   comments, key order and formatting (JSON files too).
//! - [`scalar`] spells values so that kubectl reads them back the same.
//! - [`write`] decides, per renderer, which files change: the manifest
//!   file for plain directories, a strategic-merge patch for Kustomize
//!   ([`kustomize`]), a values override for Helm ([`helm`]).
//! - [`git`] clones, commits and pushes with the `git` CLI.
//!
//! ```no_run
//! use tether_source::adopt::{Adoption, AdoptedField, Request, adopt};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let source = tether_source::Source { repo_url: "file:///srv/git/shop.git".into(),
//!     path: "shop".into(), ..Default::default() };
//! let object = tether_core::ObjectRef { group: "apps".into(), kind: "Deployment".into(),
//!     namespace: Some("shop".into()), name: "web".into() };
//! let objects = [Adoption { object, fields: vec![AdoptedField {
//!     path: "spec.replicas".into(), desired: Some(2.into()), live: Some(5.into()) }] }];
//! let adopted = adopt(&Request {
//!     source: &source, default_namespace: "shop", objects: &objects,
//!     reason: "INC-1234: scale up", author: &"Ada <ada@example.com>".parse()?,
//!     branch: None, credentials: None, sandbox: &Default::default(),
//! })?;
//! println!("{} on {}", adopted.commit, adopted.branch);
//! # Ok(()) }
//! ```

pub mod git;
pub mod helm;
pub mod kustomize;
pub mod path;
mod plan;
pub mod revert;
pub mod scalar;
mod tree;
pub mod write;
pub mod yaml;

use std::path::PathBuf;

use serde_json::Value;
use tether_core::ObjectRef;

use crate::credentials::Credentials;
use crate::render::{RenderError, Sandbox};
use crate::spec::Source;

pub use git::{Author, Checkout};
pub use path::{Selector, SelectorError, Step};
pub use write::write;
pub use yaml::{EditError, FieldEdit, edit_file};

/// One drifted object whose live values go into Git.
#[derive(Debug, Clone, PartialEq)]
pub struct Adoption {
    pub object: ObjectRef,
    pub fields: Vec<AdoptedField>,
}

/// One drifted field: its dotted path, Git's value and the live value
/// (`None`: the field is absent there).
#[derive(Debug, Clone, PartialEq)]
pub struct AdoptedField {
    pub path: String,
    pub desired: Option<Value>,
    pub live: Option<Value>,
}

/// Everything [`adopt`] needs.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub source: &'a Source,
    /// The namespace of objects whose manifests name none.
    pub default_namespace: &'a str,
    pub objects: &'a [Adoption],
    /// Why the live changes were made (the break-glass reason).
    pub reason: &'a str,
    pub author: &'a Author,
    /// Commit on a new branch of this name; `None`: on the tracked branch.
    pub branch: Option<&'a str>,
    pub credentials: Option<&'a Credentials>,
    pub sandbox: &'a Sandbox,
}

/// What [`adopt`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    pub commit: String,
    /// The branch the commit was pushed to.
    pub branch: String,
    /// Repository-relative paths of the files written.
    pub files: Vec<String>,
}

/// Why adopting failed. Nothing is pushed on any error; only
/// [`AdoptError::PushRefused`] leaves a commit behind (in a local clone).
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    #[error("nothing to adopt: no drifted fields were given")]
    NoDrift,
    #[error(
        "{object}: {path}: Secret values are never written to Git; put the new value in your secret store and revert the drift"
    )]
    Secret { object: ObjectRef, path: String },
    #[error("the source cannot be written: {reason}")]
    Unwritable { reason: String },
    #[error("{object}: not declared in any manifest of {path:?}")]
    NotFound { object: ObjectRef, path: String },
    #[error("{object}: rendered by {renderer}, whose output has no file to edit")]
    NoOrigin { object: ObjectRef, renderer: String },
    #[error("{object}: {error}")]
    Selector {
        object: ObjectRef,
        error: SelectorError,
    },
    #[error("{object}: {path}: {message}")]
    Field {
        object: ObjectRef,
        path: String,
        message: String,
    },
    #[error(
        "{object}: {path}: cannot be adopted automatically: {reason}\napply this patch to the source by hand:\n{patch}"
    )]
    NotMappable {
        object: ObjectRef,
        path: String,
        reason: String,
        patch: String,
    },
    #[error(transparent)]
    Edit(#[from] EditError),
    #[error(transparent)]
    Render(#[from] RenderError),
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("the source already has the live values: nothing to commit")]
    NothingChanged,
    #[error("{url}: git {step} failed: {message}")]
    Git {
        url: String,
        step: String,
        message: String,
    },
    #[error(
        "commit {commit} could not be pushed to branch {branch}: {message}\nthe commit is kept in {}", dir.display()
    )]
    PushRefused {
        commit: String,
        branch: String,
        dir: PathBuf,
        message: String,
    },
}

/// Writes the live values of `request.objects` into the source's tracked
/// branch (or a new branch) as one commit by the operator, and pushes it.
pub fn adopt(request: &Request<'_>) -> Result<Adopted, AdoptError> {
    let source = request.source;
    write::check(request.objects)?;
    // Clone the tracked branch.
    let checkout = Checkout::clone(&source.repo_url, &source.revision, request.credentials)?;
    // Write the fields, and check the source renders to the live values.
    let files = write(
        &checkout.path(),
        source,
        request.default_namespace,
        request.objects,
        request.sandbox,
    )?;
    // Commit as the operator.
    let message = message(request.reason, request.objects);
    let commit = checkout
        .commit(request.author, &message)?
        .ok_or(AdoptError::NothingChanged)?;
    // Push, keeping the commit when the remote refuses it.
    let branch = request.branch.unwrap_or(&checkout.branch).to_string();
    checkout.push_or_keep(&commit, &branch)?;
    Ok(Adopted {
        commit,
        branch,
        files,
    })
}

/// The commit message: the reason, then one line per field
/// (`Kind ns/name: path old → new`).
pub fn message(reason: &str, objects: &[Adoption]) -> String {
    let reason = reason.trim();
    let (subject, body) = reason.split_once('\n').unwrap_or((reason, ""));
    let mut text = format!("Adopt live changes: {subject}\n");
    if !body.trim().is_empty() {
        text.push_str(&format!("\n{}\n", body.trim()));
    }
    text.push_str("\nLive values written back into Git by `tether adopt`:\n\n");
    for adoption in objects {
        for field in &adoption.fields {
            text.push_str(&format!(
                "- {}: {} {} → {}\n",
                adoption.object,
                field.path,
                shown(field.desired.as_ref()),
                shown(field.live.as_ref())
            ));
        }
    }
    text
}

fn shown(value: Option<&Value>) -> String {
    const LIMIT: usize = 60;
    let Some(value) = value else {
        return "(absent)".into();
    };
    let text = scalar::flow(value, scalar::Flavor::Yaml);
    if text.chars().count() > LIMIT {
        let cut: String = text.chars().take(LIMIT).collect();
        format!("{cut}…")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_commit_message_gives_the_reason_and_every_field() {
        let object = ObjectRef {
            group: "apps".into(),
            kind: "Deployment".into(),
            namespace: Some("shop".into()),
            name: "web".into(),
        };
        let objects = [Adoption {
            object,
            fields: vec![
                AdoptedField {
                    path: "spec.replicas".into(),
                    desired: Some(json!(2)),
                    live: Some(json!(5)),
                },
                AdoptedField {
                    path: "metadata.labels.x".into(),
                    desired: None,
                    live: Some(json!("yes")),
                },
            ],
        }];
        assert_eq!(
            message("INC-1234: checkout is slow", &objects),
            "Adopt live changes: INC-1234: checkout is slow\n\n\
             Live values written back into Git by `tether adopt`:\n\n\
             - Deployment shop/web: spec.replicas 2 → 5\n\
             - Deployment shop/web: metadata.labels.x (absent) → \"yes\"\n"
        );
    }
}
