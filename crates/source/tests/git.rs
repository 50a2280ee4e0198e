//! Fetching, resolving and rendering from real repositories served by
//! `git daemon`, `git http-backend` and `file://`.

mod common;

use common::config_map;
use tether_source::{Credentials, Repositories, Secret, Source};
use tether_testkit::git_server::HttpBackend;
use tether_testkit::{GitDaemon, Repo, git};

fn source(url: &str, revision: &str, path: &str) -> Source {
    Source {
        repo_url: url.into(),
        revision: revision.into(),
        path: path.into(),
        ..Default::default()
    }
}

fn names(rendered: &tether_source::Rendered) -> Vec<String> {
    rendered
        .manifests
        .iter()
        .map(|m| m.id.to_string())
        .collect()
}

/// Updates `source`'s repository, which must fetch something new, and
/// renders `source` from it.
fn fetch_and_render(repositories: &Repositories, source: &Source) -> tether_source::Rendered {
    let update = repositories.update(&source.repo_url, None).unwrap();
    assert!(update.fetched);
    repositories
        .render(source, &update, &Default::default())
        .unwrap()
}

#[test]
fn a_file_url_renders_and_an_unchanged_remote_is_not_fetched_again() {
    let repo = Repo::new();
    repo.write(
        "apps/web/a.yaml",
        &format!("# header\n{}---\n{}", config_map("a"), config_map("b")),
    );
    let first = repo.commit_all("first");
    let url = repo.file_url("shop");
    let cache = tempfile::tempdir().unwrap();
    let repositories = Repositories::new(cache.path().into());

    let rendered = fetch_and_render(&repositories, &source(&url, "", "apps/web"));
    assert_eq!(rendered.commit, first);
    assert_eq!(
        names(&rendered),
        vec!["ConfigMap shop/a", "ConfigMap shop/b"]
    );
    assert_eq!(
        rendered.manifests[1].origin.to_string(),
        "apps/web/a.yaml:10"
    );
    assert_eq!(
        rendered.tree,
        git(&repo.dir, &["rev-parse", "HEAD:apps/web"])
    );
    assert!(!rendered.empty);

    let again = repositories.update(&url, None).unwrap();
    assert!(!again.fetched, "nothing changed, so nothing is fetched");

    repo.write("apps/web/c.yaml", &config_map("c"));
    let second = repo.commit_all("second");
    repo.publish("shop");
    let rendered = fetch_and_render(&repositories, &source(&url, "main", "apps/web"));
    assert_eq!(rendered.commit, second);
    assert_eq!(rendered.manifests.len(), 3);
}

#[test]
fn git_daemon_serves_branches_tags_semver_ranges_and_exact_commits() {
    let repo = Repo::new();
    repo.write("app/cm.yaml", &config_map("v1"));
    let v1 = repo.commit_all("v1");
    git(&repo.dir, &["tag", "-a", "-m", "release", "v1.2.0"]);
    repo.write("app/cm.yaml", &config_map("v14"));
    let v14 = repo.commit_all("v1.4");
    git(&repo.dir, &["tag", "v1.4.3"]);
    repo.publish("shop");
    repo.write("app/cm.yaml", &config_map("v2"));
    git(&repo.dir, &["checkout", "-q", "-b", "next"]);
    let next = repo.commit_all("v2");
    git(&repo.dir, &["tag", "v2.0.0"]);
    git(
        &repo.dir,
        &[
            "push",
            "-q",
            repo.publish("shop").join("shop.git").to_str().unwrap(),
            "next",
        ],
    );
    git(&repo.dir, &["checkout", "-q", "main"]);
    let daemon = GitDaemon::start(&repo.publish("shop"));
    let url = daemon.url("shop");
    let cache = tempfile::tempdir().unwrap();
    let repositories = Repositories::new(cache.path().into());
    let update = repositories.update(&url, None).unwrap();

    let at = |revision: &str| {
        repositories.render(&source(&url, revision, "app"), &update, &Default::default())
    };
    let range = at(">=1.2.0 <2.0.0").unwrap();
    assert_eq!(
        (range.commit.as_str(), range.tag.as_deref()),
        (v14.as_str(), Some("v1.4.3"))
    );
    assert_eq!(at("1.2.*").unwrap().commit, v1);
    assert_eq!(at("v1.2.0").unwrap().tag.as_deref(), Some("v1.2.0"));
    assert_eq!(at("next").unwrap().commit, next);
    assert_eq!(at("").unwrap().commit, v14, "HEAD is main");
    assert_eq!(at(&v1).unwrap().commit, v1);
    assert_eq!(names(&at(&v1).unwrap()), vec!["ConfigMap shop/v1"]);

    let unknown = at("nope").unwrap_err();
    assert!(
        unknown.to_string().contains("unknown revision \"nope\""),
        "{unknown}"
    );
    assert!(!unknown.is_retryable());
    let missing = repositories
        .render(
            &source(&url, "", "no/such/dir"),
            &update,
            &Default::default(),
        )
        .unwrap_err();
    assert!(
        missing
            .to_string()
            .contains("path \"no/such/dir\" does not exist"),
        "{missing}"
    );
}

#[test]
fn smart_http_fetches_and_credentials_are_never_sent_or_printed_in_clear_text() {
    let repo = Repo::new();
    repo.write("cm.yaml", &config_map("web"));
    repo.commit_all("first");
    let served = repo.publish("shop");
    let open = HttpBackend::start(&served, None);
    let cache = tempfile::tempdir().unwrap();
    let repositories = Repositories::new(cache.path().into());
    let rendered = repositories
        .fetch(
            &source(&open.url("shop"), "", ""),
            None,
            &Default::default(),
        )
        .unwrap();
    assert_eq!(names(&rendered), vec!["ConfigMap shop/web"]);

    // gix refuses to send a password over plain http; the error says so
    // without the password.
    let guarded = HttpBackend::start(&served, Some(("bot", "s3cret-token")));
    let credentials = Credentials::Http {
        username: "bot".into(),
        password: Secret::new("s3cret-token"),
        ca_cert: None,
        bearer: false,
        client_cert: None,
    };
    let other_cache = tempfile::tempdir().unwrap();
    let error = Repositories::new(other_cache.path().into())
        .fetch(
            &source(&guarded.url("shop"), "", ""),
            Some(&credentials),
            &Default::default(),
        )
        .unwrap_err();
    let printed = format!("{error} {error:?} {credentials:?}");
    assert!(!printed.contains("s3cret-token"), "{printed}");
    assert!(printed.contains("clear text"), "{printed}");
}

#[test]
fn an_unreachable_repository_is_a_retryable_error() {
    let cache = tempfile::tempdir().unwrap();
    let repositories = Repositories::new(cache.path().into());
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("git://127.0.0.1:{closed}/gone.git");
    let error = repositories
        .fetch(&source(&url, "", ""), None, &Default::default())
        .unwrap_err();
    assert!(error.is_retryable(), "{error}");
    assert!(error.to_string().starts_with(&url), "{error}");
}

#[test]
fn a_monorepo_commit_re_renders_only_the_app_it_touches() {
    let repo = Repo::new();
    for app in ["a", "b", "c"] {
        repo.write(&format!("apps/{app}/cm.yaml"), &config_map(app));
    }
    repo.commit_all("apps");
    let url = repo.file_url("mono");
    let cache = tempfile::tempdir().unwrap();
    let repositories = Repositories::new(cache.path().into());
    let render_all = |repositories: &Repositories| {
        let update = repositories.update(&url, None).unwrap();
        ["a", "b", "c"].map(|app| {
            repositories
                .render(
                    &source(&url, "", &format!("apps/{app}")),
                    &update,
                    &Default::default(),
                )
                .unwrap()
        })
    };
    let before = render_all(&repositories);
    assert_eq!(repositories.renders(), 3);
    repo.write("apps/b/cm2.yaml", &config_map("b2"));
    repo.commit_all("touch b");
    repo.publish("mono");
    let after = render_all(&repositories);
    assert_eq!(repositories.renders(), 4, "only app b is rendered again");

    // Every app sees the new commit; only b's objects (its digest) changed.
    let changed: Vec<bool> = (0..3)
        .map(|i| before[i].digest != after[i].digest)
        .collect();
    assert_eq!(changed, [false, true, false]);
    assert!((0..3).all(|i| before[i].commit != after[i].commit));
}

#[test]
fn an_empty_render_is_reported_as_empty_not_as_an_error() {
    let repo = Repo::new();
    repo.write("apps/web/README.md", "no manifests here\n");
    repo.write("apps/web/empty.yaml", "# nothing yet\n---\n");
    repo.commit_all("empty");
    let url = repo.file_url("empty");
    let cache = tempfile::tempdir().unwrap();
    let rendered = Repositories::new(cache.path().into())
        .fetch(&source(&url, "", "apps/web"), None, &Default::default())
        .unwrap();
    assert!(rendered.empty);
    assert!(rendered.manifests.is_empty());
}

/// "One round trip" over smart HTTP with protocol v2: the capability
/// advertisement (`GET info/refs`, which carries no refs in v2 and exists
/// only because HTTP has no connection to advertise on) and one POST with
/// `command=ls-refs`. Nothing else: no `command=fetch`, so no pack.
#[test]
fn an_unchanged_check_is_one_ls_refs_exchange_and_transfers_no_objects() {
    let (_repo, server, _cache, repositories) = served_shop();
    let url = server.url("shop");
    assert!(repositories.update(&url, None).unwrap().fetched);
    let first = server.take_requests();
    assert!(
        first.iter().any(|r| r.ends_with(" fetch")),
        "the first update fetches: {first:?}"
    );

    let again = repositories.update(&url, None).unwrap();
    assert!(!again.fetched);
    assert_eq!(
        server.take_requests(),
        vec![
            "GET /shop.git/info/refs?service=git-upload-pack",
            "POST /shop.git/git-upload-pack ls-refs",
        ]
    );
}

/// A webhook wakes every app of a monorepo at once; their updates queue on
/// the store and those queued behind an update that started after they
/// asked share it instead of repeating the exchange one after another.
#[test]
fn updates_asked_for_together_share_one_ls_refs_exchange() {
    let (_repo, server, _cache, repositories) = served_shop();
    let url = server.url("shop");
    repositories.update(&url, None).unwrap();
    server.take_requests();

    let callers = 32;
    let barrier = std::sync::Barrier::new(callers);
    let updates: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..callers)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    repositories.update(&url, None).unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let exchanges = ls_refs_exchanges(&server);
    assert!(
        (1..=3).contains(&exchanges),
        "{callers} callers made {exchanges} ls-refs exchanges"
    );
    assert!(updates.windows(2).all(|w| w[0].refs == w[1].refs));

    // A caller who asks after the last update finished gets a fresh one.
    repositories.update(&url, None).unwrap();
    assert_eq!(ls_refs_exchanges(&server), 1);
}

/// The ls-refs exchanges `server` answered since last asked.
fn ls_refs_exchanges(server: &HttpBackend) -> usize {
    server
        .take_requests()
        .iter()
        .filter(|r| r.ends_with(" ls-refs"))
        .count()
}

/// A one-ConfigMap repository served over smart HTTP as `shop`, and an
/// empty store to read it with (the repository and cache directory live as
/// long as the returned values).
fn served_shop() -> (Repo, HttpBackend, tempfile::TempDir, Repositories) {
    let repo = Repo::new();
    repo.write("cm.yaml", &config_map("web"));
    repo.commit_all("first");
    let server = HttpBackend::start(&repo.publish("shop"), None);
    let cache = tempfile::tempdir().unwrap();
    let repositories = Repositories::new(cache.path().into());
    (repo, server, cache, repositories)
}

#[test]
fn the_directories_of_a_revision_are_listed_from_the_trees_after_one_update() {
    let repo = Repo::new();
    repo.commit(
        &[
            ("apps/shop/base/config.yaml", config_map("shop")),
            ("apps/cart/config.yaml", config_map("cart")),
            ("README.md", "# mono\n".to_string()),
        ],
        "first",
    );
    let cache = tempfile::tempdir().unwrap();
    let repositories = Repositories::new(cache.path().into());
    let update = repositories.update(&repo.url(), None).unwrap();
    let (commit, directories) = repositories
        .directories(&repo.url(), "main", &update)
        .unwrap();
    assert_eq!(commit, repo.head());
    assert_eq!(
        directories,
        ["apps", "apps/cart", "apps/shop", "apps/shop/base"]
    );
    let error = repositories
        .directories(&repo.url(), "no-such-branch", &update)
        .unwrap_err();
    assert!(error.to_string().contains("no-such-branch"), "{error}");
}
