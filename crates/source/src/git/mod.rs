//! Git object stores: one bare repository per repository URL, shared by
//! every application that uses it, updated incrementally.
//!
//! [`Store::update`] lists the remote's refs (one ls-refs exchange) and
//! fetches only if a tip is missing from the local object store. Trees are
//! then read straight from the object store; nothing is checked out.

mod access;
mod resolve;
mod tree;
mod url;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use gix::ObjectId;
use gix::bstr::ByteSlice;

pub(crate) use access::ssh_command;
use access::{SshFiles, configure_ssh, http_credentials, trust_only};
pub use resolve::{Resolved, differs, moved, resolve};
use tree::TreeEntries;
pub use url::repo_key;

use crate::credentials::Credentials;

/// What the remote advertised in one ls-refs exchange.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteRefs {
    /// Full ref name (`refs/heads/main`, `refs/tags/v1.2.0`) to its tip.
    pub refs: BTreeMap<String, RemoteRef>,
    /// The commit the remote's HEAD points to, if it has one.
    pub head: Option<ObjectId>,
}

/// A ref's tip: `object` is an annotated tag's own id, `commit` the commit
/// it peels to (both are the commit for branches and lightweight tags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteRef {
    pub object: ObjectId,
    pub commit: ObjectId,
}

/// The outcome of [`Store::update`].
#[derive(Debug, Clone)]
pub struct Update {
    pub refs: RemoteRefs,
    /// Whether objects were transferred; `false` when every tip was local.
    pub fetched: bool,
}

/// Why a Git step failed. Connection and fetch failures are retryable (the
/// last good state stays in force); the others need the source to change.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{url}: cannot open the object store at {path}: {message}")]
    Open {
        url: String,
        path: PathBuf,
        message: String,
    },
    #[error("{url}: cannot reach the repository: {message}")]
    Unreachable { url: String, message: String },
    #[error("{url}: fetch failed: {message}")]
    Fetch { url: String, message: String },
    #[error("{url}: unknown revision {revision:?}: {reason}")]
    UnknownRevision {
        url: String,
        revision: String,
        reason: String,
    },
    #[error("commit {commit}: path {path:?} does not exist or is not a directory")]
    PathNotFound { commit: String, path: String },
    #[error("object {id}: {message}")]
    Object { id: String, message: String },
    /// The application's tree holds a submodule, which Tether does not
    /// fetch.
    #[error(
        "{url}: {path} is a Git submodule (commit {commit}); Tether does not fetch \
         submodules: vendor its files or make it a source of its own"
    )]
    Submodule {
        url: String,
        path: String,
        commit: String,
    },
    /// The tree to render is larger than [`Limits`] allow; nothing of it
    /// was kept.
    #[error("{url}: tree {tree}: {message}")]
    TreeTooLarge {
        url: String,
        tree: String,
        message: String,
    },
}

impl GitError {
    /// The error of a read of the subtree at `dir`, with the paths it names
    /// made paths of the repository.
    pub fn under(self, dir: &str) -> GitError {
        let dir = dir.trim_matches('/');
        match self {
            GitError::Submodule { url, path, commit } if !dir.is_empty() => GitError::Submodule {
                url,
                path: format!("{dir}/{path}"),
                commit,
            },
            other => other,
        }
    }

    /// Whether trying again later may succeed without any change.
    pub fn is_retryable(&self) -> bool {
        matches!(self, GitError::Unreachable { .. } | GitError::Fetch { .. })
    }
}

/// A bare object store for one repository URL.
pub struct Store {
    url: String,
    repo: gix::ThreadSafeRepository,
    /// Serializes fetches into this store.
    fetching: Mutex<()>,
    /// The newest successful update, shared with callers who asked for one
    /// before it started (see [`Store::update`]).
    last: Mutex<Option<Completed>>,
    /// Decoded trees by id. Git objects never change, so entries stay
    /// valid forever; in a monorepo every app's path walks the same few
    /// large trees, which are decoded once instead of once per app.
    trees: Mutex<HashMap<ObjectId, Arc<TreeEntries>>>,
    /// Root tree of each commit seen.
    roots: Mutex<HashMap<ObjectId, ObjectId>>,
}

/// What an exchange with the remote transfers after listing its refs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transfer {
    /// Nothing (`git ls-remote`).
    ListOnly,
    /// The objects of any tip not in the store yet (`git fetch`).
    Missing,
}

/// An update and when (and with which credentials) it began.
struct Completed {
    started: Instant,
    credentials: Option<Credentials>,
    update: Update,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("url", &redact_url(&self.url))
            .finish()
    }
}

impl Store {
    /// Opens (or creates) the store for `url` under `cache_dir`.
    pub fn open(cache_dir: &Path, url: &str) -> Result<Store, GitError> {
        let path = cache_dir.join(url::store_name(url));
        let opened = if path.join("HEAD").exists() {
            gix::open(&path)
        } else {
            std::fs::create_dir_all(&path).map_err(|e| open_error(url, &path, e))?;
            gix::init_bare(&path)
        };
        let repo = opened.map_err(|e| open_error(url, &path, e))?;
        Ok(Store {
            url: url.to_string(),
            repo: repo.into_sync(),
            fetching: Mutex::new(()),
            last: Mutex::new(None),
            trees: Mutex::new(HashMap::new()),
            roots: Mutex::new(HashMap::new()),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Lists the remote's branches, tags and HEAD, and fetches only if one
    /// of their tips is not in the object store yet.
    ///
    /// Updates of one store run one at a time, and callers queued behind an
    /// update that *started* after they asked share its result: it saw the
    /// remote at least as late as their own would have. So a webhook that
    /// wakes the 200 apps of a monorepo costs one or two ls-refs exchanges,
    /// not 200 in a row. Only callers with the same credentials share.
    pub fn update(&self, credentials: Option<&Credentials>) -> Result<Update, GitError> {
        let asked = Instant::now();
        let _fetching = self.fetching.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(shared) = self.shared_since(asked, credentials) {
            return Ok(shared);
        }
        let started = Instant::now();
        let update = self.update_now(credentials)?;
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(Completed {
            started,
            credentials: credentials.cloned(),
            update: update.clone(),
        });
        Ok(update)
    }

    /// The last update, if it started at or after `asked` with the same
    /// credentials; marked as having fetched nothing (not for this caller).
    fn shared_since(&self, asked: Instant, credentials: Option<&Credentials>) -> Option<Update> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let last = last.as_ref()?;
        (last.started >= asked && last.credentials.as_ref() == credentials).then(|| Update {
            refs: last.update.refs.clone(),
            fetched: false,
        })
    }

    /// Lists the remote's branches, tags and HEAD (one ls-refs exchange,
    /// as `git ls-remote`) and fetches nothing: the cheap check a poll
    /// makes before waking the apps whose revision moved.
    pub fn list_refs(&self, credentials: Option<&Credentials>) -> Result<RemoteRefs, GitError> {
        Ok(self.exchange(credentials, Transfer::ListOnly)?.refs)
    }

    /// One ls-refs exchange, and a fetch if a tip is missing.
    fn update_now(&self, credentials: Option<&Credentials>) -> Result<Update, GitError> {
        self.exchange(credentials, Transfer::Missing)
    }

    /// One ls-refs exchange, then the objects `transfer` asks for.
    fn exchange(
        &self,
        credentials: Option<&Credentials>,
        transfer: Transfer,
    ) -> Result<Update, GitError> {
        let mut repo = self.repo.to_thread_local();
        let ssh = match credentials {
            Some(Credentials::Ssh {
                private_key,
                known_hosts,
            }) => Some(configure_ssh(
                &mut repo,
                &self.url,
                private_key.expose(),
                known_hosts,
            )?),
            _ => None,
        };
        let failed = Failed {
            url: &self.url,
            ssh: ssh.as_ref(),
        };
        let remote = fetch_remote(&repo, &self.url).map_err(|e| failed.unreachable(&e))?;
        let connection = remote
            .connect(gix::remote::Direction::Fetch)
            .map_err(|e| failed.unreachable(&e))?;
        let mut connection = connection.with_credentials(http_credentials(credentials));
        if let Some(Credentials::Http {
            ca_cert: Some(ca_cert),
            ..
        }) = credentials
        {
            let options = trust_only(&repo, &self.url, ca_cert)?;
            connection = connection.with_transport_options(options);
        }
        let prepare = connection
            .prepare_fetch(gix::progress::Discard, with_head())
            .map_err(|e| failed.unreachable(&e))?;
        let refs = remote_refs(&prepare.ref_map().remote_refs);
        if transfer == Transfer::ListOnly || !lacks_a_tip(&repo, &refs) {
            return Ok(Update {
                refs,
                fetched: false,
            });
        }
        prepare
            .receive(gix::progress::Discard, &AtomicBool::new(false))
            .map_err(|e| GitError::Fetch {
                url: redact_url(&self.url),
                message: failed.explain(&e),
            })?;
        Ok(Update {
            refs,
            fetched: true,
        })
    }
}

/// What a failed exchange with the repository at `url` says: gix's error
/// on one line with the URL's credentials redacted, and what ssh said last.
struct Failed<'a> {
    url: &'a str,
    ssh: Option<&'a SshFiles>,
}

impl Failed<'_> {
    fn explain(&self, error: &dyn std::error::Error) -> String {
        let mut message = redact_message(&tether_core::error_text::one_line(error), self.url);
        if let Some(said) = self.ssh.and_then(SshFiles::last_words) {
            message.push_str(&format!(" (ssh: {said})"));
        }
        message
    }

    fn unreachable(&self, error: &dyn std::error::Error) -> GitError {
        GitError::Unreachable {
            url: redact_url(self.url),
            message: self.explain(error),
        }
    }
}

/// The remote at `url`, fetching every branch and tag into the store's
/// own refs (and no tags beyond them).
fn fetch_remote<'repo>(
    repo: &'repo gix::Repository,
    url: &str,
) -> Result<gix::Remote<'repo>, gix::Error> {
    let remote = repo.remote_at(url)?.with_refspecs(
        ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
        gix::remote::Direction::Fetch,
    )?;
    Ok(remote.with_fetch_tags(gix::remote::fetch::Tags::None))
}

/// The ls-refs options that also ask for the remote's HEAD.
fn with_head() -> gix::remote::ref_map::Options {
    let head = gix::refspec::parse("HEAD".into(), gix::refspec::parse::Operation::Fetch)
        .expect("HEAD is a valid refspec")
        .to_owned();
    gix::remote::ref_map::Options {
        extra_refspecs: vec![head],
        ..Default::default()
    }
}

/// Whether the store lacks an object a remote ref (or HEAD) points at.
fn lacks_a_tip(repo: &gix::Repository, refs: &RemoteRefs) -> bool {
    refs.refs
        .values()
        .map(|r| r.object)
        .chain(refs.head)
        .any(|id| !repo.has_object(id))
}

fn remote_refs(advertised: &[gix::protocol::handshake::Ref]) -> RemoteRefs {
    use gix::protocol::handshake::Ref;
    let mut refs = RemoteRefs::default();
    for advertised_ref in advertised {
        let (name, object, commit) = match advertised_ref {
            Ref::Peeled {
                full_ref_name,
                tag,
                object,
            } => (full_ref_name, *tag, *object),
            Ref::Direct {
                full_ref_name,
                object,
            } => (full_ref_name, *object, *object),
            Ref::Symbolic {
                full_ref_name,
                tag,
                object,
                ..
            } => (full_ref_name, tag.unwrap_or(*object), *object),
            Ref::Unborn { .. } => continue,
        };
        let name = name.to_str_lossy().into_owned();
        if name == "HEAD" {
            refs.head = Some(commit);
        } else {
            refs.refs.insert(name, RemoteRef { object, commit });
        }
    }
    refs
}

/// `url` with any password replaced, for messages.
pub(crate) fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((user, host)) if !user.contains('/') => match user.split_once(':') {
                Some((user, _password)) => format!("{scheme}://{user}:<redacted>@{host}"),
                None => url.to_string(),
            },
            _ => url.to_string(),
        },
        None => url.to_string(),
    }
}

pub(crate) fn redact_message(message: &str, url: &str) -> String {
    let redacted = redact_url(url);
    message.replace(url, &redacted)
}

fn open_error(url: &str, path: &Path, error: impl std::fmt::Display) -> GitError {
    GitError::Open {
        url: redact_url(url),
        path: path.to_path_buf(),
        message: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_urls_are_redacted() {
        assert_eq!(
            redact_url("https://bot:s3cret@example.com/a.git"),
            "https://bot:<redacted>@example.com/a.git"
        );
        assert_eq!(redact_url("git@example.com:a.git"), "git@example.com:a.git");
        assert_eq!(redact_url("ssh://git@h:22/a"), "ssh://git@h:22/a");
        let message = redact_message(
            "cannot reach https://bot:s3cret@h/a",
            "https://bot:s3cret@h/a",
        );
        assert!(!message.contains("s3cret"));
    }
}
