//! A snapshot of a directory's files in memory.
//!
//! Git trees are read straight from the object store into [`Files`]; a
//! renderer binary gets them written into a private temporary directory only
//! when it needs real files. Paths are relative, `/`-separated and sorted,
//! which makes every renderer's input order deterministic.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use crate::manifest::ManifestError;

/// One entry of a [`Files`] snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File(Vec<u8>),
    /// A symbolic link and its target as written in the repository.
    Symlink(String),
}

/// Files under a directory, keyed by their `/`-separated relative path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Files {
    pub entries: BTreeMap<String, Entry>,
}

impl Files {
    /// Reads every file under `root`. Symlinks are kept as links so that the
    /// same escape rules apply to local directories and Git trees.
    pub fn read_dir(root: &Path) -> Result<Files, ManifestError> {
        let mut files = Files::default();
        read_into(root, root, &mut files)?;
        Ok(files)
    }

    /// The entries under `dir` (a `/`-separated relative path, `""` for all),
    /// re-rooted at `dir`.
    pub fn subdir(&self, dir: &str) -> Files {
        let dir = dir.trim_matches('/');
        if dir.is_empty() {
            return self.clone();
        }
        let prefix = format!("{dir}/");
        let entries = self
            .entries
            .iter()
            .filter_map(|(path, entry)| {
                path.strip_prefix(&prefix)
                    .map(|rest| (rest.to_string(), entry.clone()))
            })
            .collect();
        Files { entries }
    }

    /// Checks that no symlink points outside the snapshot: absolute targets
    /// and `..` past the root are rejected.
    pub fn check_links(&self) -> Result<(), ManifestError> {
        for (path, entry) in &self.entries {
            if let Entry::Symlink(target) = entry
                && !link_stays_inside(path, target)
            {
                return Err(ManifestError::Rejected {
                    path: PathBuf::from(path),
                    reason: format!("symlink to {target:?} escapes the repository"),
                });
            }
        }
        Ok(())
    }

    /// Writes the snapshot under `dir` (which must exist and be empty),
    /// after checking that no link escapes it.
    pub fn materialize(&self, dir: &Path) -> Result<(), ManifestError> {
        self.check_links()?;
        for (path, entry) in &self.entries {
            let target = dir.join(path);
            let io = |source| ManifestError::Io {
                path: PathBuf::from(path),
                source,
            };
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            match entry {
                Entry::File(bytes) => std::fs::write(&target, bytes).map_err(io)?,
                Entry::Symlink(link) => std::os::unix::fs::symlink(link, &target).map_err(io)?,
            }
        }
        Ok(())
    }
}

fn link_stays_inside(path: &str, target: &str) -> bool {
    let mut depth: i64 = path.matches('/').count() as i64;
    for component in Path::new(target).components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => depth -= 1,
            Component::RootDir | Component::Prefix(_) => return false,
        }
        if depth < 0 {
            return false;
        }
    }
    true
}

fn read_into(root: &Path, dir: &Path, files: &mut Files) -> Result<(), ManifestError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ManifestError::Io { path, source }
    };
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        let file_type = entry.file_type().map_err(io(&path))?;
        let relative = relative_key(root, &path);
        if file_type.is_dir() {
            if entry.file_name() != ".git" {
                read_into(root, &path, files)?;
            }
        } else if file_type.is_symlink() {
            let target = std::fs::read_link(&path).map_err(io(&path))?;
            let target = target.to_string_lossy().into_owned();
            files.entries.insert(relative, Entry::Symlink(target));
        } else if file_type.is_file() {
            let bytes = std::fs::read(&path).map_err(io(&path))?;
            files.entries.insert(relative, Entry::File(bytes));
        }
    }
    Ok(())
}

fn relative_key(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    let parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_inside_the_tree_are_allowed_and_escaping_links_are_not() {
        assert!(link_stays_inside("a/b.yaml", "../c.yaml"));
        assert!(link_stays_inside("a/b.yaml", "./c/../d.yaml"));
        assert!(!link_stays_inside("a/b.yaml", "../../etc/passwd"));
        assert!(!link_stays_inside("b.yaml", "/etc/passwd"));
    }

    #[test]
    fn a_subdir_is_re_rooted() {
        let mut files = Files::default();
        files
            .entries
            .insert("apps/web/a.yaml".into(), Entry::File(b"x".to_vec()));
        files
            .entries
            .insert("apps/webshop/b.yaml".into(), Entry::File(b"y".to_vec()));
        let sub = files.subdir("apps/web/");
        assert_eq!(sub.entries.keys().collect::<Vec<_>>(), vec!["a.yaml"]);
    }
}
