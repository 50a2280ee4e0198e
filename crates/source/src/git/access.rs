//! What a fetch presents to the remote: HTTP credentials (never the
//! user's credential helpers), a private CA, or an SSH key and known_hosts
//! in private files.

use std::path::Path;
use std::sync::{Arc, Mutex};

use super::{GitError, redact_message, redact_url};
use crate::credentials::Credentials;

/// Answers gix's credential requests with `credentials` (HTTP only) and
/// never falls back to the user's credential helpers.
pub(super) fn http_credentials(
    credentials: Option<&Credentials>,
) -> impl FnMut(
    gix::credentials::helper::Action,
) -> gix::Result<Option<gix::credentials::protocol::Outcome>>
+ 'static {
    let identity = match credentials {
        Some(Credentials::Http {
            username, password, ..
        }) => Some((username.clone(), password.clone())),
        _ => None,
    };
    move |action| match (action, &identity) {
        (gix::credentials::helper::Action::Get(context), Some((username, password))) => {
            Ok(Some(gix::credentials::protocol::Outcome {
                credentials: gix::sec::identity::Credentials::UsernamePassword {
                    username: username.clone(),
                    password: password.expose().to_string(),
                    oauth_refresh_token: None,
                },
                next: context.into(),
            }))
        }
        _ => Ok(None),
    }
}

/// HTTP transport options under which `ca_cert` (PEM) is the only trusted
/// certificate authority.
pub(super) fn trust_only(
    repo: &gix::Repository,
    url: &str,
    ca_cert: &str,
) -> Result<Box<dyn std::any::Any>, GitError> {
    use gix::protocol::transport::client::blocking_io::http;
    let invalid = |message: String| GitError::Unreachable {
        url: redact_url(url),
        message,
    };
    let certificate = reqwest::Certificate::from_pem(ca_cert.as_bytes())
        .map_err(|e| invalid(format!("caCert is not a PEM certificate: {e}")))?;
    let mut options = repo
        .transport_options(url, None)
        .map_err(|e| invalid(redact_message(&e.to_string(), url)))?
        .ok_or_else(|| invalid("caCert applies to http(s) repositories only".into()))?;
    let http_options = options
        .downcast_mut::<http::Options>()
        .ok_or_else(|| invalid("caCert applies to http(s) repositories only".into()))?;
    http_options.backend = Some(Arc::new(Mutex::new(http::reqwest::Options {
        configure_client: Some(Box::new(move |builder| {
            Ok(builder.tls_certs_only([certificate.clone()]))
        })),
        configure_request: None,
    })));
    Ok(options)
}

/// The private files an `ssh` invocation uses; they must live until the
/// fetch is over.
pub(super) struct SshFiles {
    _key: tempfile::NamedTempFile,
    _known_hosts: tempfile::NamedTempFile,
    /// What `ssh` printed. gix turns only some of it into errors and copies
    /// the rest to our stderr, so a refused host key would otherwise surface
    /// as a bare "failed to fill whole buffer".
    stderr: tempfile::NamedTempFile,
}

impl SshFiles {
    /// The last line `ssh` printed (`Host key verification failed.`).
    pub(super) fn last_words(&self) -> Option<String> {
        let printed = std::fs::read_to_string(self.stderr.path()).ok()?;
        let line = printed.lines().rev().find(|l| !l.trim().is_empty())?;
        Some(line.trim().chars().take(300).collect())
    }
}

/// Points `ssh` at a private key and known_hosts written to private files.
pub(super) fn configure_ssh(
    repo: &mut gix::Repository,
    url: &str,
    private_key: &str,
    known_hosts: &str,
) -> Result<SshFiles, GitError> {
    let write = |text: &str| -> std::io::Result<tempfile::NamedTempFile> {
        use std::io::Write;
        let mut file = tempfile::NamedTempFile::new()?;
        file.write_all(text.as_bytes())?;
        if !text.ends_with('\n') {
            file.write_all(b"\n")?;
        }
        Ok(file)
    };
    let setup = |e: &dyn std::fmt::Display| GitError::Unreachable {
        url: redact_url(url),
        message: format!("cannot prepare SSH credentials: {e}"),
    };
    let key = write(private_key).map_err(|e| setup(&e))?;
    let hosts = write(known_hosts).map_err(|e| setup(&e))?;
    let stderr = tempfile::NamedTempFile::new().map_err(|e| setup(&e))?;
    let command = format!(
        "{} \"$@\" 2>'{}'",
        ssh_command(key.path(), hosts.path()),
        stderr.path().display()
    );
    let mut config = repo.config_snapshot_mut();
    config
        .set_value(&gix::config::tree::Core::SSH_COMMAND, command.as_str())
        .map_err(|e| setup(&e))?;
    // Said outright, so gix does not probe the command with `ssh -G`.
    config
        .set_value(&gix::config::tree::Ssh::VARIANT, "ssh")
        .map_err(|e| setup(&e))?;
    config.commit().map_err(|e| setup(&e))?;
    Ok(SshFiles {
        _key: key,
        _known_hosts: hosts,
        stderr,
    })
}

/// The `ssh` command line for a key file and a known_hosts file: only that
/// key, and only a host whose key is listed there. `-F /dev/null` and the
/// empty global known_hosts keep the user's and the system's `ssh`
/// configuration out of it.
pub(crate) fn ssh_command(key: &Path, known_hosts: &Path) -> String {
    format!(
        "ssh -F /dev/null -i '{}' -o IdentitiesOnly=yes -o IdentityAgent=none -o UserKnownHostsFile='{}' -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o BatchMode=yes",
        key.display(),
        known_hosts.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ssh_command_pins_the_key_and_known_hosts() {
        let command = ssh_command(Path::new("/tmp/k"), Path::new("/tmp/h"));
        assert!(command.contains("-i '/tmp/k'"));
        assert!(command.contains("UserKnownHostsFile='/tmp/h'"));
        assert!(command.contains("StrictHostKeyChecking=yes"));
    }
}
