//! The Git side of adopt, with the `git` CLI: clone the tracked branch into
//! a private directory, commit as the operator, push.
//!
//! gix (used for fetching everywhere else) cannot push, so adopt runs the
//! `git` binary for the whole round trip. Credentials go through
//! `GIT_ASKPASS` / `GIT_SSH_COMMAND` with files in the private directory,
//! never on a command line, and URLs in messages have their password
//! redacted.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::AdoptError;
use crate::credentials::Credentials;
use crate::git::{redact_message, redact_url, ssh_command};
use crate::spec::Revision;

/// A clone of the source repository at the tracked branch.
pub struct Checkout {
    /// Holds the clone and any credential files; removed on drop unless kept.
    dir: tempfile::TempDir,
    url: String,
    /// The branch the source tracks.
    pub branch: String,
    env: Vec<(String, String)>,
}

/// The operator who adopts: the commit's author and committer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Author {
    pub name: String,
    pub email: String,
}

impl std::str::FromStr for Author {
    type Err = String;

    /// `Name <email>`.
    fn from_str(text: &str) -> Result<Author, String> {
        let bad = || format!("author {text:?} is not of the form `Name <email>`");
        let (name, rest) = text.split_once('<').ok_or_else(bad)?;
        let email = rest.strip_suffix('>').ok_or_else(bad)?.trim();
        let name = name.trim();
        if name.is_empty() || email.is_empty() || email.contains(['<', '>']) {
            return Err(bad());
        }
        Ok(Author {
            name: name.to_string(),
            email: email.to_string(),
        })
    }
}

impl Checkout {
    /// Clones `url` at the branch `revision` names (the remote's HEAD when
    /// empty). An exact commit, a semver range or a tag cannot take a
    /// commit: [`AdoptError::Unwritable`].
    pub fn clone(
        url: &str,
        revision: &str,
        credentials: Option<&Credentials>,
    ) -> Result<Checkout, AdoptError> {
        let unwritable = |reason: String| AdoptError::Unwritable { reason };
        let branch = match Revision::parse(revision).map_err(unwritable)? {
            Revision::Head => None,
            Revision::Name(name) => Some(name),
            Revision::Commit(sha) => {
                return Err(unwritable(format!(
                    "revision {sha} is an exact commit; point the Application at a branch to adopt"
                )));
            }
            Revision::Range(_) => {
                return Err(unwritable(format!(
                    "revision {revision:?} is a semver range over tags; tags cannot take a commit"
                )));
            }
        };
        let dir = tempfile::Builder::new()
            .prefix("tether-adopt-")
            .tempdir()
            .map_err(|e| git_error("creating a private directory", &e.to_string(), url))?;
        let mut checkout = Checkout {
            env: credential_env(dir.path(), credentials)
                .map_err(|e| git_error("writing credentials", &e.to_string(), url))?,
            dir,
            url: url.to_string(),
            branch: String::new(),
        };
        let name = branch.clone();
        let mut args = vec!["clone", "--quiet", "--no-tags", "--single-branch"];
        if let Some(name) = &name {
            args.extend(["--branch", name.as_str()]);
        }
        args.extend([url, "repo"]);
        let parent = checkout.dir.path().to_path_buf();
        checkout.git_in(&parent, "clone", &args)?;
        let head = checkout.git("clone", &["symbolic-ref", "--quiet", "--short", "HEAD"]);
        checkout.branch = match head {
            Ok(branch) if !branch.is_empty() => branch,
            _ => {
                return Err(unwritable(format!(
                    "revision {revision:?} is a tag, not a branch; tags cannot take a commit"
                )));
            }
        };
        Ok(checkout)
    }

    /// The working tree.
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    /// The commit the clone is at.
    pub fn head(&self) -> Result<String, AdoptError> {
        self.git("rev-parse", &["rev-parse", "HEAD"])
    }

    /// Commits every change of the working tree as `author`; `None` when
    /// nothing changed.
    pub fn commit(&self, author: &Author, message: &str) -> Result<Option<String>, AdoptError> {
        self.git("add", &["add", "--all"])?;
        if self.git("diff", &["diff", "--cached", "--quiet"]).is_ok() {
            return Ok(None);
        }
        let file = self.dir.path().join("MESSAGE");
        std::fs::write(&file, message)
            .map_err(|e| git_error("commit", &e.to_string(), &self.url))?;
        let file = file.to_string_lossy().into_owned();
        let identity = [
            ("GIT_AUTHOR_NAME", &author.name),
            ("GIT_AUTHOR_EMAIL", &author.email),
            ("GIT_COMMITTER_NAME", &author.name),
            ("GIT_COMMITTER_EMAIL", &author.email),
        ];
        self.run(
            &self.path(),
            "commit",
            &["commit", "--quiet", "--no-verify", "--file", &file],
            &identity,
        )?;
        self.head().map(Some)
    }

    /// Makes the working tree's `path` (the whole tree when empty or `.`)
    /// what it was at commit `revision`, which must be on the branch:
    /// files added since are removed, the others restored. Returns the
    /// commits since `revision` that touched `path`, newest first, as
    /// `short-sha subject`.
    pub fn restore(&self, revision: &str, path: &str) -> Result<Vec<String>, AdoptError> {
        let spec = match path.trim_matches('/') {
            "" | "." => ".",
            path => path,
        };
        let on_branch = self.git(
            "merge-base",
            &["merge-base", "--is-ancestor", revision, "HEAD"],
        );
        if on_branch.is_err() {
            return Err(AdoptError::Unwritable {
                reason: format!(
                    "commit {revision} is not on branch {}; only a commit of the branch can be restored",
                    self.branch
                ),
            });
        }
        let range = format!("{revision}..HEAD");
        let log = self.git("log", &["log", "--format=%h %s", &range, "--", spec])?;
        self.git("rm", &["rm", "-r", "-q", "--ignore-unmatch", "--", spec])?;
        let existed = self.git("ls-tree", &["ls-tree", revision, "--", spec])?;
        if !existed.is_empty() || spec == "." {
            self.git("checkout", &["checkout", revision, "--", spec])?;
        }
        Ok(log.lines().map(str::to_string).collect())
    }

    /// Pushes the commit to `branch` of the remote.
    pub fn push(&self, branch: &str) -> Result<(), AdoptError> {
        let refspec = format!("HEAD:refs/heads/{branch}");
        self.git("push", &["push", "--quiet", "origin", &refspec])
            .map(|_| ())
    }

    /// Pushes `commit` to `branch` of the remote; when the remote refuses
    /// it, keeps the clone (and so the commit) on disk and says where.
    pub fn push_or_keep(self, commit: &str, branch: &str) -> Result<(), AdoptError> {
        match self.push(branch) {
            Ok(()) => Ok(()),
            Err(error) => Err(AdoptError::PushRefused {
                commit: commit.to_string(),
                branch: branch.to_string(),
                message: match error {
                    AdoptError::Git { message, .. } => message,
                    other => other.to_string(),
                },
                dir: self.keep(),
            }),
        }
    }

    /// Keeps the clone on disk (for a commit that could not be pushed) and
    /// returns where it is.
    pub fn keep(self) -> PathBuf {
        let path = self.path();
        let _ = self.dir.keep();
        path
    }

    fn git(&self, step: &str, args: &[&str]) -> Result<String, AdoptError> {
        self.git_in(&self.path(), step, args)
    }

    fn git_in(&self, dir: &Path, step: &str, args: &[&str]) -> Result<String, AdoptError> {
        self.run(dir, step, args, &[])
    }

    fn run(
        &self,
        dir: &Path,
        step: &str,
        args: &[&str],
        env: &[(&str, &String)],
    ) -> Result<String, AdoptError> {
        let mut command = Command::new("git");
        command
            .args(args)
            .current_dir(dir)
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(std::process::Stdio::null());
        for (key, value) in &self.env {
            command.env(key, value);
        }
        for (key, value) in env {
            command.env(key, value);
        }
        let output = command
            .output()
            .map_err(|e| git_error(step, &format!("cannot run git: {e}"), &self.url))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
        } else {
            let stderr = String::from_utf8_lossy(&output.stderr);
            Err(git_error(step, stderr.trim(), &self.url))
        }
    }
}

fn git_error(step: &str, message: &str, url: &str) -> AdoptError {
    AdoptError::Git {
        url: redact_url(url),
        step: step.to_string(),
        message: redact_message(message, url),
    }
}

/// Environment that hands `credentials` to git through files in `dir`.
fn credential_env(
    dir: &Path,
    credentials: Option<&Credentials>,
) -> std::io::Result<Vec<(String, String)>> {
    use std::os::unix::fs::PermissionsExt;
    let private = |name: &str, text: &str, mode: u32| -> std::io::Result<PathBuf> {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
        Ok(path)
    };
    Ok(match credentials {
        None | Some(Credentials::Registry { .. }) => Vec::new(),
        Some(Credentials::Http {
            username,
            password,
            ca_cert,
            ..
        }) => {
            private("username", username, 0o600)?;
            private("password", password.expose(), 0o600)?;
            let script = format!(
                "#!/bin/sh\ncase \"$1\" in\n  Username*) cat '{0}/username' ;;\n  *) cat '{0}/password' ;;\nesac\n",
                dir.display()
            );
            let askpass = private("askpass", &script, 0o700)?;
            let mut env = vec![("GIT_ASKPASS".into(), askpass.to_string_lossy().into_owned())];
            if let Some(ca_cert) = ca_cert {
                let ca = private("ca.pem", ca_cert, 0o600)?;
                env.push(("GIT_SSL_CAINFO".into(), ca.to_string_lossy().into_owned()));
            }
            env
        }
        Some(Credentials::Ssh {
            private_key,
            known_hosts,
        }) => {
            let mut key = private_key.expose().to_string();
            if !key.ends_with('\n') {
                key.push('\n');
            }
            let key = private("ssh-key", &key, 0o600)?;
            let hosts = private("known_hosts", known_hosts, 0o600)?;
            vec![("GIT_SSH_COMMAND".into(), ssh_command(&key, &hosts))]
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_author_is_a_name_and_an_email() {
        let author: Author = "Ada Lovelace <ada@example.com>".parse().unwrap();
        assert_eq!(author.name, "Ada Lovelace");
        assert_eq!(author.email, "ada@example.com");
        assert!("ada@example.com".parse::<Author>().is_err());
        assert!("<a@b>".parse::<Author>().is_err());
    }
}
