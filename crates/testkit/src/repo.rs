//! A real Git repository in a temporary directory, served over `file://`
//! or published as a bare copy for a server to serve.

use std::path::{Path, PathBuf};

use crate::run::git;

/// A work repository (branch `main`) that tests commit to, removed with
/// everything beside it when dropped. It lives at `<root>/work`; bare
/// copies made by [`Repo::publish`] at `<root>/served/<name>.git`.
pub struct Repo {
    root: PathBuf,
    /// The work tree.
    pub dir: PathBuf,
}

impl Repo {
    /// An empty repository in a new temporary directory.
    pub fn new() -> Repo {
        let root = tempfile::Builder::new()
            .prefix("tether-repo-")
            .tempdir()
            .expect("a temporary directory")
            .keep();
        Repo::init(root)
    }

    /// An empty repository in `root` (emptied first).
    pub fn at(root: &Path) -> Repo {
        let _ = std::fs::remove_dir_all(root);
        std::fs::create_dir_all(root).expect("the repository's directory");
        Repo::init(root.to_path_buf())
    }

    fn init(root: PathBuf) -> Repo {
        git(&root, &["init", "-q", "-b", "main", "work"]);
        let dir = root.join("work");
        Repo { root, dir }
    }

    /// The directory that holds the work tree and the published copies.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The work repository's `file://` URL.
    pub fn url(&self) -> String {
        format!("file://{}", self.dir.display())
    }

    /// Runs `git ARGS` in the work tree, which must succeed; returns its
    /// trimmed stdout.
    pub fn git(&self, args: &[&str]) -> String {
        git(&self.dir, args)
    }

    /// Writes `text` to `path` in the work tree (not committed yet).
    pub fn write(&self, path: &str, text: &str) -> &Repo {
        let file = self.dir.join(path);
        std::fs::create_dir_all(file.parent().expect("a file in the tree")).unwrap();
        std::fs::write(file, text).unwrap();
        self
    }

    /// Commits everything in the work tree (even nothing); returns the commit id.
    pub fn commit_all(&self, message: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", message]);
        self.head()
    }

    /// Writes `files` (path, text) and commits them; returns the commit id.
    pub fn commit(&self, files: &[(impl AsRef<str>, impl AsRef<str>)], message: &str) -> String {
        for (path, text) in files {
            self.write(path.as_ref(), text.as_ref());
        }
        self.commit_all(message)
    }

    /// The current commit.
    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    /// The paths commit `id` changed, as a push webhook lists them: added,
    /// modified and removed.
    pub fn changed(&self, id: &str) -> [Vec<String>; 3] {
        let listed = self.git(&["diff-tree", "--no-commit-id", "-r", "--name-status", id]);
        let mut lists: [Vec<String>; 3] = Default::default();
        for line in listed.lines() {
            let (status, path) = line.split_once('\t').expect("a name-status line");
            let list = match status {
                "A" => 0,
                "D" => 2,
                _ => 1,
            };
            lists[list].push(path.to_string());
        }
        lists
    }

    /// Publishes the work repository as `served/<name>.git` (pushing
    /// `main` and the tags when it exists) and returns the `served`
    /// directory, for a server to serve.
    pub fn publish(&self, name: &str) -> PathBuf {
        let served = self.root.join("served");
        let bare = served.join(format!("{name}.git"));
        let bare_path = bare.to_str().expect("a UTF-8 path");
        if bare.exists() {
            self.git(&["push", "-q", "--force", "--tags", bare_path, "main"]);
        } else {
            std::fs::create_dir_all(&served).unwrap();
            git(&self.root, &["clone", "-q", "--bare", "work", bare_path]);
        }
        served
    }

    /// The `file://` URL of the published copy `name` (published now).
    pub fn file_url(&self, name: &str) -> String {
        format!("file://{}/{name}.git", self.publish(name).display())
    }
}

impl Default for Repo {
    fn default() -> Repo {
        Repo::new()
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
