//! `tether diff APP`, `tether sync APP --dry-run` and `tether adopt` of
//! Applications whose repository needs credentials: the CLI reads the
//! Secret the Application names (with the operator's own kubeconfig) as the
//! controller does. Real transports: `git http-backend` behind HTTPS with
//! basic auth, and a real `sshd`, on loopback. No credential ever shows in
//! the output.

mod support;

use std::path::{Path, PathBuf};

use serde_json::json;
use support::{Repo, config_map, tether, text};
use tether_testkit::TestNamespace;
use tether_testkit::git_server::sshd::{KeyPair, Sshd};
use tether_testkit::git_server::{HttpBackend, TestCa};

const PASSWORD: &str = "s3cret-pa55word";

/// A namespace with Tether installed, and a repository whose `app/` holds
/// ConfigMap `settings` (greeting `hello`), published as the bare
/// repository `<served>/shop.git`. Returns the commit too.
async fn setup(prefix: &str) -> (TestNamespace, Repo, tempfile::TempDir, String) {
    let ns = TestNamespace::create(prefix).await;
    let installed = tether(&ns, &["install", "--namespace", &ns.name]);
    assert!(installed.status.success(), "{}", text(&installed));
    let repo = Repo::new();
    let commit = repo.commit(
        &[("app/settings.yaml", config_map("settings", "hello"))],
        "settings",
    );
    let served = tempfile::tempdir().unwrap();
    let bare = served.path().join("shop.git");
    repo.git(&["clone", "-q", "--bare", ".", bare.to_str().unwrap()]);
    (ns, repo, served, commit)
}

fn bare(served: &tempfile::TempDir) -> PathBuf {
    served.path().join("shop.git")
}

/// Applies `object` (JSON) with kubectl.
fn apply(ns: &TestNamespace, object: &serde_json::Value) {
    let output = ns.kubectl_with_stdin(&["apply", "-f", "-"], &object.to_string());
    assert!(output.status.success(), "{}", text(&output));
}

/// Application `shop` on `url`'s `app/`, with credentials in Secret `repo-creds`.
fn application(ns: &TestNamespace, url: &str) -> serde_json::Value {
    json!({"apiVersion": "tether.dev/v1alpha1", "kind": "Application",
        "metadata": {"name": "shop", "namespace": ns.name},
        "spec": {"source": {"repoURL": url, "path": "app", "secretRef": {"name": "repo-creds"}},
                 "destination": {"namespace": ns.name},
                 "syncPolicy": {"automated": false}}})
}

/// Secret `repo-creds` holding `data`, labelled as repository credentials.
fn secret(ns: &TestNamespace, data: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "repo-creds", "namespace": ns.name,
                     "labels": {"tether.dev/secret-type": "repository"}},
        "stringData": data})
}

/// `tether diff shop` and `tether sync shop --dry-run` fetch `commit` and
/// show ConfigMap `settings` to be created, printing none of `never`.
fn previews_with_credentials(ns: &TestNamespace, commit: &str, never: &[&str]) {
    let n = ns.name.as_str();
    let diff = tether(ns, &["diff", "shop", "-n", n]);
    let shown = text(&diff);
    assert_eq!(diff.status.code(), Some(1), "{shown}");
    assert!(
        shown.contains(&format!("+++ ConfigMap {n}/settings (git)")) && shown.contains("hello"),
        "{shown}"
    );

    let dry_run = tether(ns, &["sync", "shop", "-n", n, "--dry-run"]);
    let said = text(&dry_run);
    assert!(dry_run.status.success(), "{said}");
    assert!(
        said.contains(&format!("dry run of {n}/shop at {commit}"))
            && said.contains(&format!("ConfigMap {n}/settings created (dry run)")),
        "{said}"
    );
    for secret in never {
        assert!(
            !shown.contains(secret) && !said.contains(secret),
            "a credential was printed"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn diff_and_dry_run_of_an_app_on_https_use_its_basic_auth_secret() {
    let (ns, _repo, served, commit) = setup("cli-creds-https").await;
    let ca = TestCa::new();
    let server = HttpBackend::start_https(served.path(), Some(("bot", PASSWORD)), &ca);
    apply(&ns, &application(&ns, &server.url("shop")));
    apply(
        &ns,
        &secret(
            &ns,
            json!({"username": "bot", "password": PASSWORD, "caCert": ca.ca_pem}),
        ),
    );

    previews_with_credentials(&ns, &commit, &[PASSWORD]);

    // Not labelled as repository credentials: refused, and named.
    let n = ns.name.as_str();
    ns.kubectl_ok(&["label", "secret/repo-creds", "tether.dev/secret-type-"]);
    let refused = tether(&ns, &["diff", "shop", "-n", n]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused).contains(&format!(
            "Secret {n}/repo-creds: not labelled tether.dev/secret-type=repository"
        )),
        "{}",
        text(&refused)
    );

    // Absent: named too, and nothing is fetched without it.
    ns.kubectl_ok(&["delete", "secret/repo-creds"]);
    server.take_requests();
    let absent = tether(&ns, &["sync", "shop", "-n", n, "--dry-run"]);
    assert_eq!(absent.status.code(), Some(2), "{}", text(&absent));
    assert!(
        text(&absent).contains(&format!("Secret {n}/repo-creds: not found")),
        "{}",
        text(&absent)
    );
    assert!(
        server.take_requests().is_empty(),
        "fetched without the Secret"
    );
}

/// What [`setup`] made, served by a real `sshd` that knows a new deploy
/// key, with Application `shop` on it and the key in its Secret.
struct OnSsh {
    ns: TestNamespace,
    served: tempfile::TempDir,
    commit: String,
    sshd: Sshd,
    _repo: Repo,
    _keys: tempfile::TempDir,
}

async fn setup_on_ssh(prefix: &str) -> OnSsh {
    let (ns, repo, served, commit) = setup(prefix).await;
    let keys = tempfile::tempdir().unwrap();
    let key = KeyPair::generate(keys.path(), "deploy");
    let sshd = Sshd::start(&[&key]);
    apply(&ns, &application(&ns, &sshd.url(&bare(&served))));
    let data = json!({"sshPrivateKey": key.private, "knownHosts": sshd.known_hosts});
    apply(&ns, &secret(&ns, data));
    OnSsh {
        ns,
        served,
        commit,
        sshd,
        _repo: repo,
        _keys: keys,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn diff_and_dry_run_of_an_app_on_ssh_use_its_key_secret() {
    let on_ssh = setup_on_ssh("cli-creds-ssh").await;
    let (ns, sshd) = (&on_ssh.ns, &on_ssh.sshd);

    previews_with_credentials(ns, &on_ssh.commit, &["PRIVATE KEY"]);
    assert!(sshd.log().contains("Accepted publickey"), "{}", sshd.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn adopt_pushes_to_an_ssh_repository_with_the_apps_key() {
    let on_ssh = setup_on_ssh("cli-creds-adopt").await;
    let (ns, served) = (&on_ssh.ns, &on_ssh.served);

    // Live, the greeting was changed during an incident: Emergency drift.
    let n = ns.name.as_str();
    ns.kubectl_ok(&[
        "create",
        "configmap",
        "settings",
        "--from-literal=greeting=hi",
    ]);
    let drift = json!({"status": {"drift": [{
        "object": {"group": "", "kind": "ConfigMap", "namespace": n, "name": "settings"},
        "kind": "Emergency",
        "fields": [{"path": "data.greeting", "pointer": "/data/greeting", "desired": "hello", "live": "hi"}],
        "detectedAt": "2026-01-01T00:00:00Z",
        "response": "Reported"}]}});
    ns.kubectl_ok(&[
        "patch",
        "application/shop",
        "--subresource=status",
        "--type=merge",
        "-p",
        &drift.to_string(),
    ]);

    let adopted = tether(
        ns,
        &[
            "adopt",
            "shop",
            "-n",
            n,
            "--author",
            "Operator <op@example.com>",
            "-m",
            "INC-7: keep hi",
        ],
    );
    assert!(adopted.status.success(), "{}", text(&adopted));
    assert!(!text(&adopted).contains("PRIVATE KEY"));
    let pushed = git(&bare(served), &["log", "-1", "--format=%an: %s", "main"]);
    assert!(
        pushed.starts_with("Operator: ") && pushed.ends_with("INC-7: keep hi"),
        "{pushed}"
    );
    let file = git(&bare(served), &["show", "main:app/settings.yaml"]);
    assert!(
        file.contains("greeting: \"hi\"") || file.contains("greeting: hi"),
        "{file}"
    );
}

/// `git ARGS` in `dir`; its trimmed stdout.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}
