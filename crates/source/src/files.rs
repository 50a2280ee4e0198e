//! A snapshot of a directory's files in memory.
//!
//! Git trees are read straight from the object store into [`Files`]; a
//! renderer binary gets them written into a private temporary directory only
//! when it needs real files. Paths are relative, `/`-separated and sorted,
//! which makes every renderer's input order deterministic.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};

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
    /// A snapshot of text files (for tests).
    #[cfg(test)]
    pub(crate) fn of_texts(entries: &[(&str, &str)]) -> Files {
        Files {
            entries: entries
                .iter()
                .map(|(path, text)| (path.to_string(), Entry::File(text.as_bytes().to_vec())))
                .collect(),
        }
    }

    /// Reads every file under `root`. Symlinks are kept as links so that the
    /// same escape rules apply to local directories and Git trees.
    pub fn read_dir(root: &Path) -> Result<Files, ManifestError> {
        let mut files = Files::default();
        read_into(root, root, &mut files)?;
        Ok(files)
    }

    /// Every entry's path, sorted.
    pub fn paths(&self) -> Vec<&str> {
        self.entries.keys().map(String::as_str).collect()
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

    /// Checks that every symlink, followed to the end the way the kernel
    /// would follow it (through any other links of the snapshot on the way),
    /// stays inside the snapshot.
    pub fn check_links(&self) -> Result<(), ManifestError> {
        for (path, entry) in &self.entries {
            if let Entry::Symlink(target) = entry
                && let Err(escape) = self.resolve(path)
            {
                return Err(ManifestError::Rejected {
                    path: PathBuf::from(path),
                    reason: format!("symlink to {target:?} leaves the repository ({escape})"),
                });
            }
        }
        Ok(())
    }

    /// Where `path` (relative, `/`-separated) ends up once every symlink on
    /// the way is followed, as a canonical path would, but inside the
    /// snapshot: `""` is its root. An error says why the path leaves the
    /// root (an absolute link, `..` past the root, or a loop of links).
    pub fn resolve(&self, path: &str) -> Result<String, String> {
        let mut resolved: Vec<String> = Vec::new();
        let mut remaining: VecDeque<String> = components(path)?;
        let mut hops = 0;
        while let Some(part) = remaining.pop_front() {
            match part.as_str() {
                "." => {}
                ".." => {
                    if resolved.pop().is_none() {
                        return Err(format!("{} goes above the root", shown(&resolved, "..")));
                    }
                }
                _ => {
                    resolved.push(part);
                    let here = resolved.join("/");
                    if let Some(Entry::Symlink(target)) = self.entries.get(&here) {
                        hops += 1;
                        if hops > MAX_LINK_HOPS {
                            return Err(format!("more than {MAX_LINK_HOPS} links deep at {here}"));
                        }
                        let mut next = components(target)
                            .map_err(|reason| format!("{here} -> {target:?}: {reason}"))?;
                        resolved.pop();
                        next.extend(remaining);
                        remaining = next;
                    }
                }
            }
        }
        Ok(resolved.join("/"))
    }

    /// Whether `path` is a directory of the snapshot (has entries under it).
    pub fn is_dir(&self, path: &str) -> bool {
        let path = path.trim_matches('/');
        if path.is_empty() {
            return true;
        }
        let prefix = format!("{path}/");
        self.entries
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(key, _)| key.starts_with(&prefix))
    }

    /// Writes the snapshot under `dir` (which must be empty or missing),
    /// after checking that no link escapes it.
    pub fn materialize(&self, dir: &Path) -> Result<(), ManifestError> {
        self.check_links()?;
        std::fs::create_dir_all(dir).map_err(|source| ManifestError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
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

/// Linux gives up after 40 links in one lookup (`MAXSYMLINKS`).
const MAX_LINK_HOPS: usize = 40;

fn components(path: &str) -> Result<VecDeque<String>, String> {
    if path.starts_with('/') {
        return Err("is absolute".into());
    }
    Ok(path
        .split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect())
}

fn shown(resolved: &[String], next: &str) -> String {
    if resolved.is_empty() {
        next.to_string()
    } else {
        format!("{}/{next}", resolved.join("/"))
    }
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

/// `path` inside the directory `dir` (`/`-separated, `""` for the top),
/// written as it is: unlike [`join`], nothing is normalized or refused.
pub fn in_dir(dir: &str, path: &str) -> String {
    match dir.trim_matches('/') {
        "" => path.to_string(),
        dir => format!("{dir}/{path}"),
    }
}

/// `base/relative`, normalized; `None` if it leaves the repository.
pub fn join(base: &str, relative: &str) -> Option<String> {
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    if relative.starts_with('/') {
        return None;
    }
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(links: &[(&str, &str)]) -> Files {
        let mut files = Files::default();
        files
            .entries
            .insert("a/c.yaml".into(), Entry::File(b"x".to_vec()));
        for (path, target) in links {
            files
                .entries
                .insert(path.to_string(), Entry::Symlink(target.to_string()));
        }
        files
    }

    #[test]
    fn links_inside_the_tree_are_allowed_and_escaping_links_are_not() {
        let inside = snapshot(&[("a/b.yaml", "../a/./c.yaml"), ("d/up", "../")]);
        assert_eq!(inside.resolve("a/b.yaml").unwrap(), "a/c.yaml");
        assert_eq!(inside.resolve("d/up/a/b.yaml").unwrap(), "a/c.yaml");
        assert!(inside.check_links().is_ok());
        for target in ["../../etc/passwd", "/etc/passwd"] {
            let escaping = snapshot(&[("a/b.yaml", target)]);
            assert!(escaping.check_links().is_err(), "{target}");
        }
    }

    #[test]
    fn a_chain_of_links_is_followed_to_its_end() {
        // The text of `kc` stays inside; followed through `l/m/up` it does not.
        let chain = snapshot(&[
            ("l/m/up", "../../"),
            ("chart/kc", "../l/m/up/../../../x/kubeconfig"),
        ]);
        let error = chain.check_links().unwrap_err().to_string();
        assert_eq!(
            error,
            "chart/kc: symlink to \"../l/m/up/../../../x/kubeconfig\" leaves the repository (.. goes above the root)"
        );
        let looping = snapshot(&[("a/x", "y"), ("a/y", "x")]);
        let error = looping.check_links().unwrap_err().to_string();
        assert!(error.contains("more than 40 links deep"), "{error}");
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
