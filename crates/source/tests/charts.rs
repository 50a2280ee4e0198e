//! Charts from a Helm repository (served on loopback from `helm package` +
//! `helm repo index`, over HTTP and HTTPS with basic auth) and from a real
//! OCI registry (`docker-registry`, charts pushed with `helm push`),
//! rendered by `helm template` in the sandbox, without network.

use std::collections::BTreeMap;
use std::time::Duration;

use tether_source::chart::FRESH;
use tether_source::{
    Credentials, Rendered, Repositories, Sandbox, Source, SourceError, SourceInput,
};
use tether_testkit::assert_contains;
use tether_testkit::charts::{Chart, ChartRepo, ChartSigner, Registry};
use tether_testkit::git_server::TestCa;

struct Fixture {
    _cache: tempfile::TempDir,
    repositories: Repositories,
}

impl Fixture {
    fn new() -> Fixture {
        let cache = tempfile::tempdir().unwrap();
        let sandbox = Sandbox {
            tool_dirs: tether_testkit::tools::tool_dirs(),
            ..Default::default()
        };
        let repositories = Repositories::new(cache.path().into()).with_sandbox(sandbox);
        Fixture {
            _cache: cache,
            repositories,
        }
    }

    fn fetch(
        &self,
        source: &Source,
        credentials: Option<&Credentials>,
    ) -> Result<Rendered, SourceError> {
        self.repositories
            .fetch(source, credentials, &Default::default())
    }

    /// Chart `chart` at `version` (or range, or digest) of the repository
    /// or registry at `url`, fetched without credentials.
    fn fetch_chart(&self, url: &str, chart: &str, version: &str) -> Result<Rendered, SourceError> {
        self.fetch(&chart_source(url, chart, version), None)
    }
}

fn chart_source(repo_url: &str, chart: &str, version: &str) -> Source {
    Source {
        repo_url: repo_url.into(),
        chart: chart.into(),
        version: version.into(),
        insecure: repo_url.starts_with("oci://"),
        ..Default::default()
    }
}

/// The `data` of ConfigMap `name` among the rendered objects.
fn config_data(rendered: &Rendered, name: &str) -> BTreeMap<String, String> {
    let manifest = rendered
        .manifests
        .iter()
        .find(|m| m.id.name == name)
        .unwrap_or_else(|| panic!("no {name} among {:?}", ids(rendered)));
    serde_json::from_value(manifest.object["data"].clone()).unwrap()
}

fn ids(rendered: &Rendered) -> Vec<String> {
    rendered
        .manifests
        .iter()
        .map(|m| m.id.to_string())
        .collect()
}

fn credentials(pairs: &[(&str, &str)]) -> Credentials {
    let data = pairs
        .iter()
        .map(|(key, value)| (key.to_string(), value.as_bytes().to_vec()))
        .collect();
    Credentials::from_data(&data).unwrap()
}

/// Replaces `file` with another web 1.0.0 archive that plants a Secret.
fn overwrite_with_other_content(file: &std::path::Path) {
    let other = tempfile::tempdir().unwrap();
    let tampered = Chart::new("web", "1.0.0")
        .template(
            "extra.yaml",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: planted\n",
        )
        .package(other.path());
    std::fs::copy(tampered, file).unwrap();
}

fn after_fresh() {
    std::thread::sleep(FRESH + Duration::from_millis(100));
}

#[test]
fn a_version_range_takes_a_new_patch_from_the_index_but_never_the_next_minor() {
    let repo = ChartRepo::start(None);
    repo.publish(&Chart::new("web", "1.2.3"));
    let fixture = Fixture::new();
    let source = chart_source(&repo.url(), "web", "1.2.x");
    let first = fixture.fetch(&source, None).unwrap();
    assert_eq!(first.commit, "1.2.3");
    assert!(first.tree.starts_with("sha256:"), "{}", first.tree);
    assert_eq!(config_data(&first, "web-web")["version"], "1.2.3");

    repo.publish(&Chart::new("web", "1.2.4"));
    after_fresh();
    let upgraded = fixture.fetch(&source, None).unwrap();
    assert_eq!(upgraded.commit, "1.2.4");
    assert_eq!(config_data(&upgraded, "web-web")["version"], "1.2.4");

    repo.publish(&Chart::new("web", "1.3.0"));
    after_fresh();
    assert_eq!(fixture.fetch(&source, None).unwrap().commit, "1.2.4");
}

#[test]
fn an_unchanged_index_costs_one_conditional_request_and_no_download_or_render() {
    let repo = ChartRepo::start(None);
    repo.publish(&Chart::new("web", "1.2.3"));
    let fixture = Fixture::new();
    let source = chart_source(&repo.url(), "web", "");
    fixture.fetch(&source, None).unwrap();
    let (before, renders) = (
        fixture.repositories.charts().stats(),
        fixture.repositories.renders(),
    );
    repo.take_requests();
    for _ in 0..3 {
        after_fresh();
        assert_eq!(fixture.fetch(&source, None).unwrap().commit, "1.2.3");
    }
    let requests = repo.take_requests();
    assert_eq!(requests.len(), 3, "one index read a poll: {requests:?}");
    assert!(
        requests.iter().all(|r| r.starts_with("GET /index.yaml")),
        "{requests:?}"
    );
    let after = fixture.repositories.charts().stats();
    assert_eq!(
        after.not_modified - before.not_modified,
        3,
        "each answered 304"
    );
    assert_eq!(
        after.downloads, before.downloads,
        "no archive downloaded again"
    );
    assert_eq!(
        fixture.repositories.renders(),
        renders,
        "nothing rendered again"
    );
}

#[test]
fn a_repository_behind_basic_auth_and_a_private_ca_is_read_and_a_refused_login_is_named() {
    let ca = TestCa::new();
    let repo = ChartRepo::start_https(Some(("bot", "s3cret-pw")), &ca);
    repo.publish(&Chart::new("web", "1.0.0"));
    let fixture = Fixture::new();
    let source = chart_source(&repo.url(), "web", "1.0.0");
    let good = credentials(&[
        ("username", "bot"),
        ("password", "s3cret-pw"),
        ("caCert", &ca.ca_pem),
    ]);
    assert_eq!(fixture.fetch(&source, Some(&good)).unwrap().commit, "1.0.0");

    let wrong = credentials(&[
        ("username", "bot"),
        ("password", "wrong-pw"),
        ("caCert", &ca.ca_pem),
    ]);
    let error = fixture.fetch(&source, Some(&wrong)).unwrap_err();
    let text = format!("{error} {error:?}");
    assert_contains(&text, &format!("{}/index.yaml", repo.url()));
    assert_contains(&text, "authentication failed");
    assert_contains(&text, "chart \"web\"");
    assert!(
        !text.contains("wrong-pw") && !text.contains("s3cret-pw"),
        "{text}"
    );
    assert!(!error.is_retryable());

    let untrusted = credentials(&[("username", "bot"), ("password", "s3cret-pw")]);
    let error = fixture
        .fetch(&source, Some(&untrusted))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("certificate"),
        "the system roots do not know the test CA: {error}"
    );
}

#[test]
fn an_archive_that_does_not_match_its_index_digest_is_refused_naming_both() {
    let repo = ChartRepo::start(None);
    let archive = repo.publish(&Chart::new("web", "1.0.0"));
    // Republished with other content under the same name, index untouched.
    overwrite_with_other_content(&archive);
    let error = Fixture::new()
        .fetch_chart(&repo.url(), "web", "1.0.0")
        .unwrap_err()
        .to_string();
    assert_contains(&error, "digest mismatch");
    assert_contains(&error, &format!("{}/web-1.0.0.tgz", repo.url()));
}

#[test]
fn a_dependency_is_fetched_from_its_repository_before_helm_renders_without_network() {
    let repo = ChartRepo::start(None);
    repo.publish(&Chart::new("cache", "0.1.0"));
    repo.publish(&Chart::new("cache", "0.1.1"));
    repo.publish(&Chart::new("cache", "0.2.0"));
    repo.publish(&Chart::new("web", "2.0.0").dependency("cache", "0.1.x", &repo.url()));
    let fixture = Fixture::new();
    let rendered = fixture.fetch_chart(&repo.url(), "web", "2.0.0").unwrap();
    // The subchart renders under the parent's release name.
    let names = ids(&rendered);
    assert!(names.iter().any(|n| n.contains("web-web")), "{names:?}");
    assert_eq!(
        config_data(&rendered, "web-web")["version"],
        "2.0.0",
        "{names:?}"
    );
    assert_eq!(
        config_data(&rendered, "web-cache")["version"],
        "0.1.1",
        "the dependency at the highest 0.1.x, under the parent's release"
    );
}

#[test]
fn a_chart_in_git_gets_the_dependency_version_its_chart_lock_pins() {
    let charts = ChartRepo::start(None);
    charts.publish(&Chart::new("cache", "0.1.0"));
    charts.publish(&Chart::new("cache", "0.1.1"));
    let repo = tether_testkit::Repo::new();
    let chart = Chart::new("web", "3.0.0").dependency("cache", "0.1.x", &charts.url());
    chart.write(&repo.root().join("work/charts"));
    repo.write(
        "charts/web/Chart.lock",
        &format!(
            "dependencies:\n- name: cache\n  repository: {}\n  version: 0.1.0\ndigest: sha256:0\ngenerated: \"2026-01-01T00:00:00Z\"\n",
            charts.url()
        ),
    );
    repo.commit_all("web with an unvendored dependency");
    let source: Source = serde_json::from_value(serde_json::json!({
        "repoURL": repo.url(), "path": "charts/web", "renderer": {"helm": {}}
    }))
    .unwrap();
    let rendered = Fixture::new().fetch(&source, None).unwrap();
    assert_eq!(
        config_data(&rendered, "web-cache")["version"],
        "0.1.0",
        "{:?}",
        ids(&rendered)
    );
    assert_eq!(
        Sandbox::default().mode,
        tether_source::render::SandboxMode::Required,
        "helm runs in the sandbox (no network) unless turned off"
    );
}

#[test]
fn a_missing_chart_or_version_names_the_repository_and_what_is_published() {
    let repo = ChartRepo::start(None);
    repo.publish(&Chart::new("web", "1.0.0"));
    let fixture = Fixture::new();
    let error = fixture
        .fetch_chart(&repo.url(), "web", "2.x")
        .unwrap_err()
        .to_string();
    assert_contains(&error, "chart \"web\" (version 2.x)");
    assert_contains(&error, "newest: 1.0.0");
    let error = fixture
        .fetch_chart(&repo.url(), "api", "")
        .unwrap_err()
        .to_string();
    assert_contains(&error, "is not in the repository's index");
}

#[test]
fn a_chart_from_an_oci_registry_resolves_by_tag_by_range_and_by_digest() {
    let registry = Registry::start(None);
    let pinned = registry.push(&Chart::new("web", "1.2.3"), "charts");
    registry.push(&Chart::new("web", "1.2.4"), "charts");
    registry.push(&Chart::new("web", "1.3.0"), "charts");
    let fixture = Fixture::new();
    let url = registry.url("charts");
    let by_tag = fixture.fetch_chart(&url, "web", "1.2.3").unwrap();
    assert_eq!(config_data(&by_tag, "web-web")["version"], "1.2.3");
    let by_range = fixture.fetch_chart(&url, "web", "1.2.x").unwrap();
    assert_eq!(by_range.commit, "1.2.4");
    let by_digest = fixture.fetch_chart(&url, "web", &pinned).unwrap();
    assert_eq!(
        by_digest.commit, "1.2.3",
        "the version from the manifest's annotation"
    );
    assert_eq!(by_digest.tree, by_tag.tree, "the same chart layer");
}

#[test]
fn a_registry_login_comes_from_a_docker_config_and_a_missing_or_wrong_one_is_named() {
    let registry = Registry::start(Some(("bot", "reg-pa55")));
    registry.push(&Chart::new("web", "1.0.0"), "charts");
    let fixture = Fixture::new();
    let source = chart_source(&registry.url("charts"), "web", "1.0.0");
    let error = fixture.fetch(&source, None).unwrap_err().to_string();
    assert_contains(&error, "authentication failed");
    assert_contains(&error, "wants a login");
    let config = |password: &str| {
        let auth = base64_of(&format!("bot:{password}"));
        let json = format!(
            r#"{{"auths": {{"127.0.0.1:{}": {{"auth": "{auth}"}}}}}}"#,
            registry.port
        );
        credentials(&[(".dockerconfigjson", &json)])
    };
    assert_eq!(
        fixture
            .fetch(&source, Some(&config("reg-pa55")))
            .unwrap()
            .commit,
        "1.0.0"
    );
    let error = Fixture::new()
        .fetch(&source, Some(&config("wrong")))
        .unwrap_err();
    let text = format!("{error} {error:?}");
    assert_contains(&text, "credentials were refused");
    assert!(
        !text.contains("reg-pa55") && !text.contains("wrong"),
        "{text}"
    );
}

#[test]
fn a_tampered_blob_in_the_registry_is_refused_by_its_digest() {
    let registry = Registry::start(None);
    registry.push(&Chart::new("web", "1.0.0"), "charts");
    let fixture = Fixture::new();
    let source = chart_source(&registry.url("charts"), "web", "1.0.0");
    let layer = fixture
        .repositories
        .resolve_package(&source, None)
        .unwrap()
        .digest;
    overwrite_with_other_content(&registry.blob_file(&layer));
    let error = fixture.fetch(&source, None).unwrap_err().to_string();
    assert_contains(&error, "digest mismatch");
    assert_contains(&error, &layer);
}

fn base64_of(text: &str) -> String {
    // The test's own tiny encoder keeps base64 out of the source crate's
    // dev-dependencies.
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = (chunk[0] as u32) << 16
            | (*chunk.get(1).unwrap_or(&0) as u32) << 8
            | *chunk.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn a_chart_takes_values_lent_by_a_git_source_and_follows_their_changes() {
    let charts = ChartRepo::start(None);
    charts.publish(&Chart::new("web", "1.0.0"));
    let values = tether_testkit::Repo::new();
    values.commit(
        &[("envs/prod/values.yaml", "greeting: from-git\n")],
        "prod values",
    );
    let sources: Vec<Source> = serde_json::from_value(serde_json::json!([
        {"repoURL": charts.url(), "chart": "web", "version": "1.0.0",
         "renderer": {"helm": {"valueFiles": ["$values/envs/prod/values.yaml"]}}},
        {"repoURL": values.url(), "ref": "values"},
    ]))
    .unwrap();
    let fixture = Fixture::new();
    let render = || {
        let inputs = SourceInput::zip(&sources, &[]);
        fixture
            .repositories
            .render_sources(&inputs, &Default::default())
    };
    let first = render().unwrap();
    assert_eq!(config_data(&first, "web-web")["greeting"], "from-git");
    assert_eq!(first.sources.len(), 2, "{:?}", first.sources);
    assert_eq!(first.sources[0].revision, "1.0.0");
    assert_eq!(first.sources[1].revision, values.head());
    assert_eq!(first.commit, format!("1.0.0 + {}", values.head()));

    values.commit(
        &[("envs/prod/values.yaml", "greeting: changed\n")],
        "change",
    );
    let second = render().unwrap();
    assert_eq!(config_data(&second, "web-web")["greeting"], "changed");
    assert_ne!(second.digest, first.digest);
}

#[test]
fn an_object_two_sources_declare_and_an_unknown_reference_are_named() {
    let charts = ChartRepo::start(None);
    charts.publish(&Chart::new("web", "1.0.0"));
    let fixture = Fixture::new();
    let both: Vec<Source> = serde_json::from_value(serde_json::json!([
        {"repoURL": charts.url(), "chart": "web", "version": "1.0.0"},
        {"repoURL": charts.url(), "chart": "web", "version": "1.0.0", "name": "again"},
    ]))
    .unwrap();
    let inputs = SourceInput::zip(&both, &[]);
    let error = fixture
        .repositories
        .render_sources(&inputs, &Default::default())
        .unwrap_err();
    assert!(error.to_string().contains("ConfigMap web-web"), "{error}");

    let dangling: Vec<Source> = serde_json::from_value(serde_json::json!([
        {"repoURL": charts.url(), "chart": "web", "version": "1.0.0",
         "renderer": {"helm": {"valueFiles": ["$values/prod.yaml"]}}},
    ]))
    .unwrap();
    let inputs = SourceInput::zip(&dangling, &[]);
    let error = fixture
        .repositories
        .render_sources(&inputs, &Default::default())
        .unwrap_err();
    assert!(
        error.to_string().contains("no source named \"values\""),
        "{error}"
    );
}

#[test]
fn an_oci_artifact_of_manifests_renders_its_path_by_tag_range_or_digest() {
    let registry = Registry::start(None);
    let config = |greeting: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shop\ndata:\n  greeting: {greeting}\n"
        )
    };
    let pinned = registry.push_artifact(
        &[("apps/shop/config.yaml", &config("one"))],
        "manifests/platform",
        "1.0.0",
    );
    registry.push_artifact(
        &[("apps/shop/config.yaml", &config("two"))],
        "manifests/platform",
        "1.1.0",
    );
    registry.push_artifact(
        &[("apps/shop/config.yaml", &config("edge"))],
        "manifests/platform",
        "latest",
    );
    let fixture = Fixture::new();
    let artifact = |version: &str| Source {
        repo_url: registry.url("manifests/platform"),
        version: version.into(),
        path: "apps/shop".into(),
        insecure: true,
        ..Default::default()
    };
    let greeting = |version: &str| {
        let rendered = fixture.fetch(&artifact(version), None).unwrap();
        (
            rendered.commit.clone(),
            config_data(&rendered, "shop")["greeting"].clone(),
        )
    };
    assert_eq!(greeting(""), ("latest".into(), "edge".into()));
    assert_eq!(greeting("1.x"), ("1.1.0".into(), "two".into()));
    assert_eq!(greeting(&pinned).1, "one");
    let error = fixture
        .fetch(&artifact("2.x"), None)
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("OCI artifact (2.x) from "), "{error}");
    assert_contains(&error, "newest: 1.1.0, 1.0.0");
}

#[test]
fn a_chart_asked_to_be_verified_renders_only_with_provenance_signed_by_a_trusted_key() {
    let signer = ChartSigner::generate("release-team");
    let stranger = ChartSigner::generate("stranger");
    let repo = ChartRepo::start(None);
    repo.publish_signed(&Chart::new("web", "1.0.0"), &signer);
    repo.publish(&Chart::new("web", "1.1.0"));
    let verified = |version: &str, key: &str| Source {
        verify: tether_source::Verification {
            mode: tether_source::VerifyMode::Provenance,
            openpgp_keys: vec![key.to_string()],
            ..Default::default()
        },
        ..chart_source(&repo.url(), "web", version)
    };
    let fixture = Fixture::new();
    let rendered = fixture
        .fetch(&verified("1.0.0", &signer.public_key), None)
        .unwrap();
    assert_eq!(rendered.verified_by.len(), 1, "{:?}", rendered.verified_by);

    let error = fixture
        .fetch(&verified("1.0.0", &stranger.public_key), None)
        .unwrap_err()
        .to_string();
    assert_contains(&error, "signed by an untrusted key");
    let error = fixture
        .fetch(&verified("1.1.0", &signer.public_key), None)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("web-1.1.0.tgz.prov"),
        "an unsigned chart: {error}"
    );

    // The same from a registry: helm pushes the provenance as a layer.
    let registry = Registry::start(None);
    registry.push_signed(&Chart::new("web", "2.0.0"), "charts", &signer);
    let from_registry = Source {
        verify: verified("", &signer.public_key).verify,
        ..chart_source(&registry.url("charts"), "web", "2.0.0")
    };
    assert_eq!(
        fixture
            .fetch(&from_registry, None)
            .unwrap()
            .verified_by
            .len(),
        1
    );
}
