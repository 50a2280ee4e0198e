//! Reading a commit's trees and files straight from the object store:
//! nothing is checked out, and decoded trees are cached by id.

use std::collections::HashMap;
use std::sync::Arc;

use gix::ObjectId;
use gix::bstr::ByteSlice;

use super::{GitError, Store, redact_url};
use crate::files::{Entry, Files, in_dir};
use crate::limits::Limits;

/// A decoded tree: name → (object id, whether it is a tree).
pub(super) type TreeEntries = HashMap<String, (ObjectId, bool)>;

/// Decoded trees kept at most; the cache is cleared when it grows past this.
const TREE_CACHE_LIMIT: usize = 50_000;

impl Store {
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

fn object_error(id: ObjectId, error: impl std::fmt::Display) -> GitError {
    GitError::Object {
        id: id.to_string(),
        message: error.to_string(),
    }
}
