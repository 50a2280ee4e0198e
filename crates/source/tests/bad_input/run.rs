//! Running one case through the code the controller uses: the renderer
//! entry point ([`tether_source::render::render`], as for a Git tree) and
//! the webhook parser ([`tether_source::webhook::parse_push`]).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tether_source::files::{Entry, Files};
use tether_source::render::render;
use tether_source::webhook::parse_push;
use tether_source::{Capabilities, Renderer, Sandbox};

use crate::corpus::{Case, Input};

pub enum Outcome {
    /// The one-line error (the error and its sources, as the controller
    /// writes it into a condition).
    Refused(String),
    /// What was produced instead of an error.
    Accepted(String),
}

/// The sandbox the controller renders with, finding the renderer binaries
/// where the test kit installs them.
pub fn sandbox() -> Sandbox {
    Sandbox {
        tool_dirs: tether_testkit::tools::tool_dirs(),
        ..Sandbox::default()
    }
}

pub fn run_case(case: &Case, sandbox: &Sandbox) -> Outcome {
    match &case.input {
        Input::Render {
            files,
            symlinks,
            renderer,
            path,
        } => {
            let mut snapshot = Files::default();
            for (file, bytes) in files {
                snapshot
                    .entries
                    .insert(file.clone(), Entry::File(bytes.clone()));
            }
            for (link, target) in symlinks {
                snapshot
                    .entries
                    .insert(link.clone(), Entry::Symlink(target.clone()));
            }
            render_snapshot(&snapshot, renderer, path, sandbox)
        }
        Input::Webhook {
            headers,
            body,
            secret,
            sign,
            signing_secret,
            appended,
        } => {
            let mut headers = headers.clone();
            if let Some(header) = sign {
                let key = signing_secret.as_ref().unwrap_or(secret);
                let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap();
                mac.update(body);
                let digest = hex::encode(mac.finalize().into_bytes());
                let value = if header.eq_ignore_ascii_case("X-Hub-Signature-256") {
                    format!("sha256={digest}")
                } else {
                    digest
                };
                headers.insert(header.clone(), value);
            }
            let header = |name: &str| {
                headers
                    .iter()
                    .find(|(key, _)| key.eq_ignore_ascii_case(name))
                    .map(|(_, value)| value.clone())
            };
            let body = [body.as_slice(), appended].concat();
            match parse_push(header, &body, secret.as_bytes()) {
                Ok(push) => Outcome::Accepted(format!("{push:?}")),
                Err(error) => Outcome::Refused(error.to_string()),
            }
        }
    }
}

pub fn render_snapshot(
    snapshot: &Files,
    renderer: &serde_json::Value,
    path: &str,
    sandbox: &Sandbox,
) -> Outcome {
    let renderer: Renderer = match serde_json::from_value(renderer.clone()) {
        Ok(renderer) => renderer,
        Err(error) => panic!("renderer {renderer}: {error}"),
    };
    match render(&renderer, snapshot, path, sandbox, &Capabilities::default()) {
        Ok(manifests) => Outcome::Accepted(format!(
            "{} objects: {}",
            manifests.len(),
            manifests
                .iter()
                .take(3)
                .map(|m| m.id.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        Err(error) => Outcome::Refused(tether_core::error_text::one_line(&error)),
    }
}
