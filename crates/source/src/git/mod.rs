//! Git object stores: one bare repository per repository URL, shared by
//! every application that uses it, updated incrementally.
//!
//! [`Store::update`] lists the remote's refs (one ls-refs exchange) and
//! fetches only if a tip is missing from the local object store. Trees are
//! then read straight from the object store; nothing is checked out.

mod resolve;
mod url;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use gix::ObjectId;
use gix::bstr::ByteSlice;

pub use resolve::{Resolved, differs, moved, resolve};
pub use url::repo_key;

use crate::credentials::Credentials;
use crate::files::{Entry, Files, in_dir};
use crate::limits::Limits;

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

/// A decoded tree: name → (object id, whether it is a tree).
type TreeEntries = HashMap<String, (ObjectId, bool)>;

/// Decoded trees kept at most; the cache is cleared when it grows past this.
const TREE_CACHE_LIMIT: usize = 50_000;

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
        let explain = |e: &dyn std::error::Error| {
            let mut message = redact_message(&tether_core::error_text::one_line(e), &self.url);
            if let Some(said) = ssh.as_ref().and_then(SshFiles::last_words) {
                message.push_str(&format!(" (ssh: {said})"));
            }
            message
        };
        let unreachable = |e: &dyn std::error::Error| GitError::Unreachable {
            url: redact_url(&self.url),
            message: explain(e),
        };
        let remote = repo
            .remote_at(self.url.as_str())
            .and_then(|remote| {
                remote.with_refspecs(
                    ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
                    gix::remote::Direction::Fetch,
                )
            })
            .map_err(|e| unreachable(&e))?
            .with_fetch_tags(gix::remote::fetch::Tags::None);
        let connection = remote
            .connect(gix::remote::Direction::Fetch)
            .map_err(|e| unreachable(&e))?;
        let mut connection = connection.with_credentials(http_credentials(credentials));
        if let Some(Credentials::Http {
            ca_cert: Some(ca_cert),
            ..
        }) = credentials
        {
            let options = trust_only(&repo, &self.url, ca_cert)?;
            connection = connection.with_transport_options(options);
        }
        let head = gix::refspec::parse("HEAD".into(), gix::refspec::parse::Operation::Fetch)
            .expect("HEAD is a valid refspec")
            .to_owned();
        let options = gix::remote::ref_map::Options {
            extra_refspecs: vec![head],
            ..Default::default()
        };
        let prepare = connection
            .prepare_fetch(gix::progress::Discard, options)
            .map_err(|e| unreachable(&e))?;
        let refs = remote_refs(&prepare.ref_map().remote_refs);
        let missing = refs
            .refs
            .values()
            .map(|r| r.object)
            .chain(refs.head)
            .any(|id| !repo.has_object(id));
        if !missing || transfer == Transfer::ListOnly {
            return Ok(Update {
                refs,
                fetched: false,
            });
        }
        prepare
            .receive(gix::progress::Discard, &AtomicBool::new(false))
            .map_err(|e| GitError::Fetch {
                url: redact_url(&self.url),
                message: explain(&e),
            })?;
        Ok(Update {
            refs,
            fetched: true,
        })
    }

    /// The raw bytes of a commit or tag object, as signed.
    pub fn object_bytes(&self, id: ObjectId) -> Result<(gix::object::Kind, Vec<u8>), GitError> {
        let repo = self.repo.to_thread_local();
        let object = repo.find_object(id).map_err(|e| object_error(id, e))?;
        Ok((object.kind, object.data.clone()))
    }

    /// Whether the store holds `id`.
    pub fn has_object(&self, id: ObjectId) -> bool {
        self.repo.to_thread_local().has_object(id)
    }

    /// The tree id of directory `path` (`""` for the root) in `commit`.
    pub fn tree_at(&self, commit: ObjectId, path: &str) -> Result<ObjectId, GitError> {
        let not_found = || GitError::PathNotFound {
            commit: commit.to_string(),
            path: path.to_string(),
        };
        let mut tree = self.root_tree(commit)?;
        for component in path.split('/').filter(|c| !c.is_empty() && *c != ".") {
            let entries = self.decoded_tree(tree)?;
            match entries.get(component) {
                Some((id, true)) => tree = *id,
                _ => return Err(not_found()),
            }
        }
        Ok(tree)
    }

    /// The names of the files (and symlinks) directly in directory `path`
    /// of `commit`, sorted; subdirectories are left out.
    pub fn file_names_at(&self, commit: ObjectId, path: &str) -> Result<Vec<String>, GitError> {
        let entries = self.decoded_tree(self.tree_at(commit, path)?)?;
        let mut names: Vec<String> = entries
            .iter()
            .filter(|(_, (_, is_tree))| !is_tree)
            .map(|(name, _)| name.clone())
            .collect();
        names.sort_unstable();
        Ok(names)
    }

    /// Every directory of `commit` (`a`, `a/b`, …), sorted, at most
    /// `max` of them (the rest left out) and none deeper than `depth`
    /// segments: what the ApplicationSet Git directory generator matches
    /// its globs against. Read from the (cached) trees, no checkout.
    pub fn directories_at(
        &self,
        commit: ObjectId,
        depth: usize,
        max: usize,
    ) -> Result<Vec<String>, GitError> {
        let mut found = Vec::new();
        let mut pending = vec![(String::new(), self.root_tree(commit)?, 0)];
        while let Some((prefix, tree, level)) = pending.pop() {
            if level >= depth {
                continue;
            }
            for (name, (id, is_tree)) in self.decoded_tree(tree)?.iter() {
                if !is_tree || found.len() >= max {
                    continue;
                }
                let path = in_dir(&prefix, name);
                found.push(path.clone());
                pending.push((path, *id, level + 1));
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// The root tree of `commit` (commits never change either).
    fn root_tree(&self, commit: ObjectId) -> Result<ObjectId, GitError> {
        if let Some(root) = self
            .roots
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&commit)
        {
            return Ok(*root);
        }
        let root = self
            .repo
            .to_thread_local()
            .find_commit(commit)
            .and_then(|c| c.tree_id())
            .map_err(|e| object_error(commit, e))?
            .detach();
        let mut roots = self.roots.lock().unwrap_or_else(|e| e.into_inner());
        if roots.len() >= TREE_CACHE_LIMIT {
            roots.clear();
        }
        roots.insert(commit, root);
        Ok(root)
    }

    fn decoded_tree(&self, id: ObjectId) -> Result<Arc<TreeEntries>, GitError> {
        if let Some(entries) = self
            .trees
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
        {
            return Ok(entries.clone());
        }
        let repo = self.repo.to_thread_local();
        let tree = repo.find_tree(id).map_err(|e| object_error(id, e))?;
        let decoded = tree.decode().map_err(|e| object_error(id, e))?;
        let entries: TreeEntries = decoded
            .entries
            .iter()
            .map(|entry| {
                (
                    entry.filename.to_str_lossy().into_owned(),
                    (entry.oid.to_owned(), entry.mode.is_tree()),
                )
            })
            .collect();
        let entries = Arc::new(entries);
        let mut trees = self.trees.lock().unwrap_or_else(|e| e.into_inner());
        if trees.len() >= TREE_CACHE_LIMIT {
            trees.clear();
        }
        trees.insert(id, entries.clone());
        Ok(entries)
    }

    /// Every file and symlink under `tree`, read from the object store,
    /// unless there are more of them, or more bytes, than `limits` allow:
    /// the sizes are read from the objects' headers before any content,
    /// so a huge tree costs no more memory than its listing. A submodule
    /// under `within` (a `/`-separated path in `tree`, `""` for all) is
    /// refused: its files are not fetched, so rendering without them would
    /// quietly drop (and prune) what they declare.
    pub fn read_tree(
        &self,
        tree: ObjectId,
        limits: &Limits,
        within: &str,
    ) -> Result<Files, GitError> {
        let repo = self.repo.to_thread_local();
        let mut recorder = gix::traverse::tree::Recorder::default();
        repo.find_tree(tree)
            .and_then(|t| t.traverse().breadthfirst(&mut recorder))
            .map_err(|e| object_error(tree, e))?;
        let too_large = |message: String| GitError::TreeTooLarge {
            url: redact_url(&self.url),
            tree: tree.to_string(),
            message,
        };
        let blobs = || {
            recorder
                .records
                .iter()
                .filter(|e| !(e.mode.is_tree() || e.mode.is_commit()))
        };
        let within = within.trim_matches('/');
        if let Some(submodule) = recorder.records.iter().find(|e| {
            let path = e.filepath.to_str_lossy();
            e.mode.is_commit()
                && (within.is_empty() || path == within || path.starts_with(&format!("{within}/")))
        }) {
            return Err(GitError::Submodule {
                url: redact_url(&self.url),
                path: submodule.filepath.to_string(),
                commit: submodule.oid.to_string(),
            });
        }
        let count = blobs().count();
        if count > limits.max_tree_files {
            return Err(too_large(format!(
                "{count} files, more than the limit of {} per source",
                limits.max_tree_files
            )));
        }
        let mut bytes: u64 = 0;
        for entry in blobs() {
            let header = repo
                .find_header(entry.oid)
                .map_err(|e| object_error(entry.oid, e))?;
            bytes = bytes.saturating_add(header.size());
            if bytes > limits.max_tree_bytes as u64 {
                return Err(too_large(format!(
                    "its files are more than the limit of {} per source (at {})",
                    crate::limits::size(limits.max_tree_bytes),
                    entry.filepath
                )));
            }
        }
        let mut files = Files::default();
        for entry in recorder.records {
            let mode = entry.mode;
            if mode.is_tree() || mode.is_commit() {
                continue;
            }
            let blob = repo
                .find_blob(entry.oid)
                .map_err(|e| object_error(entry.oid, e))?;
            let path = entry.filepath.to_str_lossy().into_owned();
            let data = blob.data.clone();
            let value = if mode.is_link() {
                Entry::Symlink(String::from_utf8_lossy(&data).into_owned())
            } else {
                Entry::File(data)
            };
            files.entries.insert(path, value);
        }
        Ok(files)
    }
}

/// Answers gix's credential requests with `credentials` (HTTP only) and
/// never falls back to the user's credential helpers.
fn http_credentials(
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
fn trust_only(
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

/// The private files an `ssh` invocation uses; they must live until the
/// fetch is over.
struct SshFiles {
    _key: tempfile::NamedTempFile,
    _known_hosts: tempfile::NamedTempFile,
    /// What `ssh` printed. gix turns only some of it into errors and copies
    /// the rest to our stderr, so a refused host key would otherwise surface
    /// as a bare "failed to fill whole buffer".
    stderr: tempfile::NamedTempFile,
}

impl SshFiles {
    /// The last line `ssh` printed (`Host key verification failed.`).
    fn last_words(&self) -> Option<String> {
        let printed = std::fs::read_to_string(self.stderr.path()).ok()?;
        let line = printed.lines().rev().find(|l| !l.trim().is_empty())?;
        Some(line.trim().chars().take(300).collect())
    }
}

/// Points `ssh` at a private key and known_hosts written to private files.
fn configure_ssh(
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

fn object_error(id: ObjectId, error: impl std::fmt::Display) -> GitError {
    GitError::Object {
        id: id.to_string(),
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

    #[test]
    fn the_ssh_command_pins_the_key_and_known_hosts() {
        let command = ssh_command(Path::new("/tmp/k"), Path::new("/tmp/h"));
        assert!(command.contains("-i '/tmp/k'"));
        assert!(command.contains("UserKnownHostsFile='/tmp/h'"));
        assert!(command.contains("StrictHostKeyChecking=yes"));
    }
}
