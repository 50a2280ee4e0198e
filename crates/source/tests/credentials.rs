//! Credentials over real transports: HTTPS with basic auth behind
//! `git http-backend`, and SSH against a real `sshd`. The password, token
//! and private key must never show in an error or its `Debug` output.

mod common;

use std::collections::BTreeMap;

use common::config_map;
use tether_source::{Credentials, Repositories, Source};
use tether_testkit::Repo;
use tether_testkit::git_server::sshd::{KeyPair, Sshd};
use tether_testkit::git_server::{HttpBackend, TestCa};

const PASSWORD: &str = "s3cret-pa55word";

fn source(url: &str) -> Source {
    Source {
        repo_url: url.into(),
        ..Default::default()
    }
}

fn fetch(url: &str, credentials: Option<&Credentials>) -> Result<Vec<String>, String> {
    let cache = tempfile::tempdir().unwrap();
    match Repositories::new(cache.path().into()).fetch(
        &source(url),
        credentials,
        &Default::default(),
    ) {
        Ok(rendered) => Ok(rendered
            .manifests
            .iter()
            .map(|m| m.id.to_string())
            .collect()),
        Err(error) => Err(format!("{error}\n{error:?}")),
    }
}

/// A repository with one ConfigMap, published as `served/shop.git`.
fn shop() -> Repo {
    let repo = Repo::new();
    repo.write("cm.yaml", &config_map("web"));
    repo.commit_all("first");
    repo.publish("shop");
    repo
}

/// [`shop`] served over HTTPS, with a certificate the returned CA signed,
/// to `bot` with [`PASSWORD`] only.
fn shop_over_https() -> (TestCa, HttpBackend, Repo) {
    let (ca, repo) = (TestCa::new(), shop());
    let server = HttpBackend::start_https(&repo.publish("shop"), Some(("bot", PASSWORD)), &ca);
    (ca, server, repo)
}

/// Credentials of `bot` with `password` that trust `ca`, from a file.
fn bot_credentials(password: &str, ca: &TestCa) -> Credentials {
    http_credentials(&credentials_file("bot", password, Some(&ca.ca_pem)))
}

fn http_credentials(file_text: &str) -> Credentials {
    Credentials::from_file_text(file_text).unwrap()
}

/// A YAML credentials file, as `tether render --credentials FILE` reads it.
fn credentials_file(username: &str, password: &str, ca_pem: Option<&str>) -> String {
    let mut text = format!("username: {username}\npassword: {password}\n");
    if let Some(pem) = ca_pem {
        text.push_str("caCert: |\n");
        for line in pem.lines() {
            text.push_str(&format!("  {line}\n"));
        }
    }
    text
}

#[test]
fn https_with_basic_auth_fetches_with_a_credentials_file_and_a_secret() {
    let (ca, server, _repo) = shop_over_https();
    let url = server.url("shop");

    let from_file = bot_credentials(PASSWORD, &ca);
    assert_eq!(
        fetch(&url, Some(&from_file)).unwrap(),
        vec!["ConfigMap shop/web"]
    );

    // A Kubernetes Secret's data, base64-decoded, with a token.
    let secret = BTreeMap::from([
        ("username".to_string(), b"bot".to_vec()),
        ("token".to_string(), PASSWORD.as_bytes().to_vec()),
        ("caCert".to_string(), ca.ca_pem.as_bytes().to_vec()),
    ]);
    let from_secret = Credentials::from_data(&secret).unwrap();
    assert_eq!(
        fetch(&url, Some(&from_secret)).unwrap(),
        vec!["ConfigMap shop/web"]
    );
    assert!(!format!("{from_file:?} {from_secret:?}").contains(PASSWORD));
}

#[test]
fn https_with_a_wrong_or_missing_password_fails_naming_the_url_but_not_the_password() {
    let (ca, server, _repo) = shop_over_https();
    let wrong = "wrong-pa55word";
    let url = server.url("shop");
    // The password in the URL too, as some people write it.
    let url_with_password = url.replace("://", &format!("://bot:{wrong}@"));

    for (url, credentials) in [
        (&url, Some(bot_credentials(wrong, &ca))),
        (&url_with_password, Some(bot_credentials(wrong, &ca))),
    ] {
        let error = fetch(url, credentials.as_ref()).unwrap_err();
        assert!(!error.contains(wrong), "{error}");
        assert!(error.contains("127.0.0.1"), "names the repository: {error}");
        assert!(
            error.to_lowercase().contains("401") || error.contains("authenticat"),
            "says authentication failed: {error}"
        );
    }

    let ca_only = Credentials::from_data(&BTreeMap::from([
        ("token".to_string(), Vec::new()),
        ("caCert".to_string(), ca.ca_pem.as_bytes().to_vec()),
    ]))
    .unwrap();
    let error = fetch(&url, Some(&ca_only)).unwrap_err();
    assert!(error.starts_with(&url), "{error}");
}

#[test]
fn https_refuses_a_server_whose_certificate_the_credentials_do_not_trust() {
    let (_ca, server, _repo) = shop_over_https();
    let other_ca = TestCa::new();
    let credentials = bot_credentials(PASSWORD, &other_ca);
    let error = fetch(&server.url("shop"), Some(&credentials)).unwrap_err();
    assert!(error.starts_with(&server.url("shop")), "{error}");
    assert!(error.to_lowercase().contains("certificate"), "{error}");
    assert!(!error.contains(PASSWORD), "{error}");
    assert!(
        server.take_requests().is_empty(),
        "no request reached the server"
    );
}

fn ssh_credentials(key: &KeyPair, known_hosts: &str) -> Credentials {
    Credentials::from_data(&BTreeMap::from([
        ("sshPrivateKey".to_string(), key.private.as_bytes().to_vec()),
        ("knownHosts".to_string(), known_hosts.as_bytes().to_vec()),
    ]))
    .unwrap()
}

/// A new key pair `deploy`, and the directory it is kept in.
fn deploy_key() -> (KeyPair, tempfile::TempDir) {
    let keys = tempfile::tempdir().unwrap();
    (KeyPair::generate(keys.path(), "deploy"), keys)
}

#[test]
fn ssh_fetches_with_the_key_and_known_hosts_from_the_credentials() {
    let repo = shop();
    let (key, _keys) = deploy_key();
    let sshd = Sshd::start(&[&key]);
    let bare = repo.publish("shop").join("shop.git");
    let credentials = ssh_credentials(&key, &sshd.known_hosts);

    let fetched = fetch(&sshd.url(&bare), Some(&credentials));
    assert_eq!(
        fetched,
        Ok(vec!["ConfigMap shop/web".to_string()]),
        "sshd said:\n{}",
        sshd.log()
    );
    assert!(sshd.log().contains("Accepted publickey"), "{}", sshd.log());
}

#[test]
fn ssh_fetches_an_scp_like_url() {
    let repo = shop();
    let (key, _keys) = deploy_key();
    let Some(sshd) = Sshd::start_on_port_22(&[&key]) else {
        eprintln!(
            "skipped: 127.0.0.1:22 is taken or not ours to bind (scp-like URLs have no port)"
        );
        return;
    };
    let bare = repo.publish("shop").join("shop.git");
    let url = format!("{}@127.0.0.1:{}", Sshd::user(), bare.display());
    let credentials = ssh_credentials(&key, &sshd.known_hosts);
    assert_eq!(
        fetch(&url, Some(&credentials)),
        Ok(vec!["ConfigMap shop/web".to_string()]),
        "sshd said:\n{}",
        sshd.log()
    );
}

#[test]
fn ssh_refuses_an_unknown_host_key_and_a_key_the_server_does_not_know() {
    let repo = shop();
    let keys = tempfile::tempdir().unwrap();
    let (key, stranger) = (
        KeyPair::generate(keys.path(), "deploy"),
        KeyPair::generate(keys.path(), "stranger"),
    );
    let sshd = Sshd::start(&[&key]);
    let url = sshd.url(&repo.publish("shop").join("shop.git"));

    // The credentials trust another host's key only.
    let other_host = KeyPair::generate(keys.path(), "other_host");
    let other_line = other_host
        .public
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let wrong_hosts = format!("[127.0.0.1]:{} {other_line}\n", sshd.port);
    let error = fetch(&url, Some(&ssh_credentials(&key, &wrong_hosts))).unwrap_err();
    assert!(error.starts_with(&url), "{error}");
    assert!(error.contains("Host key verification failed"), "{error}");
    assert!(!error.contains("PRIVATE KEY"), "{error}");

    // The host is trusted but the server does not know the key.
    let error = fetch(&url, Some(&ssh_credentials(&stranger, &sshd.known_hosts))).unwrap_err();
    assert!(error.starts_with(&url), "{error}");
    assert!(error.contains("Permission denied"), "{error}");
    assert!(!error.contains("PRIVATE KEY"), "{error}");
}

/// Sharing an update between callers queued together must not let a
/// caller without the credentials ride on one made with them.
#[test]
fn callers_with_other_credentials_never_share_an_update() {
    let (ca, server, _repo) = shop_over_https();
    let url = server.url("shop");
    let right = bot_credentials(PASSWORD, &ca);
    let wrong = bot_credentials("wrong", &ca);
    let cache = tempfile::tempdir().unwrap();
    let repositories = Repositories::new(cache.path().into());

    let barrier = std::sync::Barrier::new(12);
    let outcomes: Vec<(bool, bool)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..12)
            .map(|i| {
                let (repositories, barrier, url) = (&repositories, &barrier, &url);
                let authorized = i % 3 == 0;
                let credentials = [Some(&right), Some(&wrong), None][i % 3];
                scope.spawn(move || {
                    barrier.wait();
                    (authorized, repositories.update(url, credentials).is_ok())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        outcomes.iter().all(|(authorized, ok)| authorized == ok),
        "(authorized, succeeded) per caller: {outcomes:?}"
    );
}
