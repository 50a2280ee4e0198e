//! Signed commits and tags made by real `gpg` and `ssh-keygen`, verified in
//! pure Rust.

mod common;

use std::path::Path;
use std::process::Command;

use common::config_map;
use tether_source::{Repositories, Source, Verification, VerifyMode};
use tether_testkit::{Repo, git, git_command, run_ok};

struct Keys {
    dir: tempfile::TempDir,
}

impl Keys {
    fn new() -> Keys {
        Keys {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn gnupghome(&self) -> std::path::PathBuf {
        let home = self.dir.path().join("gnupg");
        std::fs::create_dir_all(&home).unwrap();
        let mut perms = std::fs::metadata(&home).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o700);
        std::fs::set_permissions(&home, perms).unwrap();
        home
    }

    /// Generates an ed25519 OpenPGP key and returns (fingerprint, armored public key).
    fn gpg_key(&self, email: &str) -> (String, String) {
        let home = self.gnupghome();
        let gpg = |args: &[&str]| tether_testkit::run::gpg(&home, args);
        gpg(&[
            "--quick-gen-key",
            &format!("Test <{email}>"),
            "ed25519",
            "sign",
            "never",
        ]);
        let listing = gpg(&["--with-colons", "--list-keys", email]);
        let fingerprint = listing
            .lines()
            .find(|l| l.starts_with("fpr:"))
            .and_then(|l| l.split(':').nth(9))
            .unwrap()
            .to_string();
        (fingerprint, gpg(&["--armor", "--export", email]))
    }

    /// Generates an SSH key; returns (private key path, public key line).
    fn ssh_key(&self, name: &str) -> (std::path::PathBuf, String) {
        let path = self.dir.path().join(name);
        let status = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success());
        let public = std::fs::read_to_string(path.with_extension("pub")).unwrap();
        (path, public.trim().to_string())
    }

    /// `git` configured to sign with OpenPGP key `fingerprint`.
    fn gpg_git(&self, dir: &Path, fingerprint: &str, args: &[&str]) {
        let mut command = git_command(dir, &["-c", &format!("user.signingkey={fingerprint}")]);
        command.args(args).env("GNUPGHOME", self.gnupghome());
        run(command);
    }

    fn ssh_git(&self, dir: &Path, key: &Path, args: &[&str]) {
        let mut command = git_command(
            dir,
            &[
                "-c",
                "gpg.format=ssh",
                "-c",
                &format!("user.signingkey={}", key.display()),
            ],
        );
        command.args(args);
        run(command);
    }
}

fn run(mut command: Command) {
    run_ok(&mut command);
}

fn verified(
    url: &str,
    revision: &str,
    verify: Verification,
) -> Result<tether_source::Rendered, tether_source::SourceError> {
    let cache = tempfile::tempdir().unwrap();
    let source = Source {
        repo_url: url.into(),
        revision: revision.into(),
        verify,
        ..Default::default()
    };
    Repositories::new(cache.path().into()).fetch(&source, None, &Default::default())
}

fn pgp(mode: VerifyMode, armored: &str) -> Verification {
    Verification {
        mode,
        openpgp_keys: vec![armored.to_string()],
        ..Default::default()
    }
}

/// A repository with a ConfigMap staged for its first commit.
fn staged_repo() -> Repo {
    let repo = Repo::new();
    repo.write("cm.yaml", &config_map("web"));
    git(&repo.dir, &["add", "-A"]);
    repo
}

/// A repository whose one commit (a ConfigMap) `fingerprint` signed.
fn signed_repo(keys: &Keys, fingerprint: &str, message: &str) -> Repo {
    let repo = staged_repo();
    keys.gpg_git(
        &repo.dir,
        fingerprint,
        &["commit", "-q", "-S", "-m", message],
    );
    repo
}

/// `repo`'s default branch, verified in `Head` mode against `armored`.
fn verified_head(
    repo: &Repo,
    armored: &str,
) -> Result<tether_source::Rendered, tether_source::SourceError> {
    verified(&repo.file_url("shop"), "", pgp(VerifyMode::Head, armored))
}

#[test]
fn a_commit_signed_with_a_trusted_openpgp_key_is_rendered() {
    let keys = Keys::new();
    let (fingerprint, armored) = keys.gpg_key("ops@example.com");
    let repo = signed_repo(&keys, &fingerprint, "signed");
    let rendered = verified_head(&repo, &armored).unwrap();
    assert_eq!(rendered.verified_by, vec![fingerprint]);
}

#[test]
fn an_unsigned_commit_is_refused_naming_the_commit() {
    let keys = Keys::new();
    let (_, armored) = keys.gpg_key("ops@example.com");
    let repo = staged_repo();
    let commit = repo.commit_all("unsigned");
    let error = verified_head(&repo, &armored).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("commit {}: not signed", &commit[..12])
    );
    assert!(!error.is_retryable());
}

#[test]
fn a_commit_signed_by_an_untrusted_key_is_refused_naming_the_key() {
    let keys = Keys::new();
    let (_, trusted) = keys.gpg_key("ops@example.com");
    let (stranger, _) = keys.gpg_key("stranger@example.com");
    let repo = signed_repo(&keys, &stranger, "by a stranger");
    let error = verified_head(&repo, &trusted).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "signed by key {stranger}: signed by an untrusted key"
        )),
        "{message}"
    );
}

#[test]
fn a_tampered_commit_whose_signature_does_not_verify_is_refused() {
    let keys = Keys::new();
    let (fingerprint, armored) = keys.gpg_key("ops@example.com");
    let repo = signed_repo(&keys, &fingerprint, "signed");
    let raw = git(&repo.dir, &["cat-file", "commit", "HEAD"]);
    let forged = format!("{}\n", raw.replace("signed", "forged"));
    let path = repo.root().join("forged");
    std::fs::write(&path, forged).unwrap();
    let id = git(
        &repo.dir,
        &["hash-object", "-t", "commit", "-w", path.to_str().unwrap()],
    );
    git(&repo.dir, &["update-ref", "refs/heads/main", &id]);
    let error = verified_head(&repo, &armored).unwrap_err();
    assert!(
        error.to_string().ends_with("signature does not verify"),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .starts_with(&format!("commit {}", &id[..12])),
        "{error}"
    );
}

#[test]
fn ssh_signed_commits_and_tags_verify_against_allowed_signers() {
    let (keys, repo) = (Keys::new(), staged_repo());
    let (key, public) = keys.ssh_key("ops");
    keys.ssh_git(&repo.dir, &key, &["commit", "-q", "-S", "-m", "ssh signed"]);
    keys.ssh_git(&repo.dir, &key, &["tag", "-s", "-m", "release", "v1.0.0"]);
    git(&repo.dir, &["tag", "v1.0.1"]);
    let url = repo.file_url("shop");
    let ssh = |mode| Verification {
        mode,
        allowed_signers: format!("ops@example.com {public}\n"),
        ..Default::default()
    };
    let both = verified(&url, "v1.0.0", ssh(VerifyMode::TagAndHead)).unwrap();
    assert_eq!(both.verified_by.len(), 2);
    assert!(
        both.verified_by[0].starts_with("SHA256:"),
        "{:?}",
        both.verified_by
    );
    assert_eq!(both.tag.as_deref(), Some("v1.0.0"));
    let lightweight = verified(&url, "v1.0.1", ssh(VerifyMode::Tag)).unwrap_err();
    assert!(
        lightweight.to_string().contains("needs an annotated tag"),
        "{lightweight}"
    );

    let (_, other) = keys.ssh_key("other");
    let untrusted = Verification {
        mode: VerifyMode::Head,
        allowed_signers: format!("other@example.com {other}\n"),
        ..Default::default()
    };
    let error = verified(&url, "", untrusted).unwrap_err();
    assert!(error.to_string().contains("SHA256:"), "{error}");
    assert!(
        error.to_string().ends_with("signed by an untrusted key"),
        "{error}"
    );
}

#[test]
fn an_openpgp_signed_annotated_tag_verifies_in_tag_mode() {
    let (keys, repo) = (Keys::new(), staged_repo());
    repo.commit_all("unsigned commit");
    let (fingerprint, armored) = keys.gpg_key("ops@example.com");
    keys.gpg_git(
        &repo.dir,
        &fingerprint,
        &["tag", "-s", "-m", "release", "v2.0.0"],
    );
    let url = repo.file_url("shop");
    let rendered = verified(&url, ">=2.0.0", pgp(VerifyMode::Tag, &armored)).unwrap();
    assert_eq!(rendered.tag.as_deref(), Some("v2.0.0"));
    let error = verified(&url, "v2.0.0", pgp(VerifyMode::TagAndHead, &armored)).unwrap_err();
    assert!(error.to_string().ends_with("not signed"), "{error}");
}
