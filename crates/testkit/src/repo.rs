//! A real Git repository in a temporary directory, served over `file://`.

use std::path::PathBuf;
use std::process::Command;

/// A Git repository (branch `main`) in a temporary directory, removed when
/// dropped. Commits carry a fixed test author.
pub struct Repo {
    pub dir: PathBuf,
}

impl Repo {
    /// An empty repository; `name` (e.g. the test's namespace) keeps
    /// concurrent tests apart.
    pub fn new(name: &str) -> Repo {
        let dir = std::env::temp_dir().join(format!("tether-repo-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let repo = Repo { dir };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    pub fn url(&self) -> String {
        format!("file://{}", self.dir.display())
    }

    /// Runs `git args` in the repository; panics with git's stderr if it
    /// fails, else returns its trimmed stdout.
    pub fn git(&self, args: &[&str]) -> String {
        let output = Command::new("git")
            .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap().trim().to_string()
    }

    /// Writes `files` (path, text) and commits them; returns the commit id.
    pub fn commit(&self, files: &[(&str, String)], message: &str) -> String {
        for (path, text) in files {
            let path = self.dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
        self.git(&["rev-parse", "HEAD"])
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
