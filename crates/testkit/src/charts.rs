//! Helm charts for tests, and where they are published: charts written to
//! a directory ([`Chart`]), packaged with the real `helm`, served from a
//! Helm repository on loopback ([`ChartRepo`]: `helm repo index` behind
//! the test HTTP(S) server, with `ETag`s and optional basic auth) or pushed
//! with `helm push` to a real OCI registry ([`Registry`]: Debian's
//! `docker-registry`, the CNCF distribution registry, optionally behind
//! htpasswd users).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::git_server::{HttpBackend, TestCa};
use crate::header;
use crate::run::run_ok;
use crate::tools::tool_dirs;

/// The `helm` binary (scripts/setup.sh builds it); panics without one,
/// since a chart test that cannot run proves nothing.
pub fn helm() -> Command {
    let dir = tool_dirs()
        .into_iter()
        .find(|dir| dir.join("helm").is_file())
        .expect("helm is not installed: run scripts/setup.sh");
    let mut command = Command::new(dir.join("helm"));
    command.env(
        "HELM_CACHE_HOME",
        std::env::temp_dir().join("tether-test-helm/cache"),
    );
    command.env(
        "HELM_CONFIG_HOME",
        std::env::temp_dir().join("tether-test-helm/config"),
    );
    command
}

/// A chart to write: its name, version, templates, values and dependencies.
#[derive(Debug, Clone)]
pub struct Chart {
    pub name: String,
    pub version: String,
    templates: Vec<(String, String)>,
    values: String,
    dependencies: Vec<(String, String, String)>,
}

impl Chart {
    /// A chart with one ConfigMap `{{ .Release.Name }}-{{ .Chart.Name }}` whose
    /// `version` entry is the chart's version and `greeting` the value
    /// `greeting` (default "hello").
    pub fn new(name: &str, version: &str) -> Chart {
        Chart {
            name: name.into(),
            version: version.into(),
            templates: vec![(
                "configmap.yaml".into(),
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Name }}\ndata:\n  version: {{ .Chart.Version | quote }}\n  greeting: {{ .Values.greeting | quote }}\n".into(),
            )],
            values: "greeting: hello\n".into(),
            dependencies: Vec::new(),
        }
    }

    pub fn template(mut self, file: &str, text: &str) -> Chart {
        self.templates.push((file.into(), text.into()));
        self
    }

    /// A dependency on chart `name` at `version` (a constraint) from
    /// `repository` (a URL, `oci://…` or `file://…`).
    pub fn dependency(mut self, name: &str, version: &str, repository: &str) -> Chart {
        self.dependencies
            .push((name.into(), version.into(), repository.into()));
        self
    }

    /// Writes the chart into `parent/NAME` and returns that directory.
    pub fn write(&self, parent: &Path) -> PathBuf {
        let dir = parent.join(&self.name);
        std::fs::create_dir_all(dir.join("templates")).unwrap();
        let mut chart_yaml = format!(
            "apiVersion: v2\nname: {}\nversion: {}\nappVersion: \"{}\"\n",
            self.name, self.version, self.version
        );
        if !self.dependencies.is_empty() {
            chart_yaml.push_str("dependencies:\n");
            for (name, version, repository) in &self.dependencies {
                chart_yaml.push_str(&format!(
                    "- name: {name}\n  version: \"{version}\"\n  repository: \"{repository}\"\n"
                ));
            }
        }
        std::fs::write(dir.join("Chart.yaml"), chart_yaml).unwrap();
        std::fs::write(dir.join("values.yaml"), &self.values).unwrap();
        for (file, text) in &self.templates {
            std::fs::write(dir.join("templates").join(file), text).unwrap();
        }
        dir
    }

    /// Writes and packages the chart into `out` with `helm package` (with
    /// `tar` when it has dependencies: `helm package` wants them vendored,
    /// and the point is that they are not); returns the archive's path.
    pub fn package(&self, out: &Path) -> PathBuf {
        let work = tempfile::tempdir().unwrap();
        self.write(work.path());
        let archive = out.join(format!("{}-{}.tgz", self.name, self.version));
        match self.dependencies.is_empty() {
            true => run_ok(
                helm()
                    .arg("package")
                    .arg(work.path().join(&self.name))
                    .arg("-d")
                    .arg(out),
            ),
            false => run_ok(
                Command::new("tar")
                    .arg("-czf")
                    .arg(&archive)
                    .arg("-C")
                    .arg(work.path())
                    .arg(&self.name),
            ),
        };
        archive
    }
}

/// An OpenPGP key that signs charts as `helm package --sign` does (RSA:
/// Helm's OpenPGP library has no EdDSA), in its own GnuPG home.
pub struct ChartSigner {
    dir: tempfile::TempDir,
    /// The user id `--key` names.
    pub name: String,
    /// The ASCII-armored public key, to trust.
    pub public_key: String,
}

impl ChartSigner {
    pub fn generate(name: &str) -> ChartSigner {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("gnupg");
        std::fs::create_dir_all(&home).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
        let gpg = |args: &[&str]| crate::run::gpg(&home, args);
        let user = format!("{name} <{name}@charts.example>");
        gpg(&["--quick-gen-key", &user, "rsa2048", "sign", "never"]);
        // A binary export: helm reads a legacy keyring file.
        let output = Command::new("gpg")
            .env("GNUPGHOME", &home)
            .args(["--batch", "--export-secret-keys", &user])
            .output()
            .unwrap();
        std::fs::write(dir.path().join("secring.gpg"), output.stdout).unwrap();
        let public_key = gpg(&["--armor", "--export", &user]);
        ChartSigner {
            dir,
            name: name.to_string(),
            public_key,
        }
    }

    fn keyring(&self) -> PathBuf {
        self.dir.path().join("secring.gpg")
    }
}

impl Chart {
    /// Packages the chart into `out` signed by `signer` (`helm package
    /// --sign`): the archive and its `.prov` beside it; returns the
    /// archive's path.
    pub fn package_signed(&self, out: &Path, signer: &ChartSigner) -> PathBuf {
        let work = tempfile::tempdir().unwrap();
        self.write(work.path());
        run_ok(
            helm()
                .arg("package")
                .arg(work.path().join(&self.name))
                .args(["-d"])
                .arg(out)
                .args(["--sign", "--key", &signer.name, "--keyring"])
                .arg(signer.keyring()),
        );
        out.join(format!("{}-{}.tgz", self.name, self.version))
    }
}

/// A Helm chart repository on loopback: archives and `index.yaml` made by
/// `helm package` and `helm repo index`, served with `ETag`s.
pub struct ChartRepo {
    server: HttpBackend,
    _dir: tempfile::TempDir,
}

impl ChartRepo {
    /// An empty repository over HTTP, optionally behind basic auth.
    pub fn start(basic_auth: Option<(&str, &str)>) -> ChartRepo {
        ChartRepo::serve(basic_auth, None)
    }

    /// An empty repository over HTTPS with a certificate signed by `ca`.
    pub fn start_https(basic_auth: Option<(&str, &str)>, ca: &TestCa) -> ChartRepo {
        ChartRepo::serve(basic_auth, Some(ca))
    }

    fn serve(basic_auth: Option<(&str, &str)>, ca: Option<&TestCa>) -> ChartRepo {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("index.yaml"),
            "apiVersion: v1\nentries: {}\n",
        )
        .unwrap();
        let server = HttpBackend::serve_files(dir.path(), basic_auth, ca);
        ChartRepo { server, _dir: dir }
    }

    /// The repository's URL (`http(s)://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        self.server.base_url()
    }

    /// The directory served.
    pub fn dir(&self) -> &Path {
        &self.server.root
    }

    /// Packages `chart` into the repository and indexes it again (`helm
    /// repo index --merge`, so earlier entries keep their dates).
    pub fn publish(&self, chart: &Chart) -> PathBuf {
        self.indexed(chart.package(self.dir()))
    }

    /// `publish`, signed by `signer` (the `.prov` is served beside the
    /// archive).
    pub fn publish_signed(&self, chart: &Chart, signer: &ChartSigner) -> PathBuf {
        self.indexed(chart.package_signed(self.dir(), signer))
    }

    /// Indexes the repository again (`helm repo index --merge`, so earlier
    /// entries keep their dates) after `archive` was added; returns it.
    fn indexed(&self, archive: PathBuf) -> PathBuf {
        let index = self.dir().join("index.yaml");
        run_ok(
            helm()
                .args(["repo", "index"])
                .arg(self.dir())
                .arg("--merge")
                .arg(&index),
        );
        archive
    }

    /// The request lines served so far (`GET /index.yaml HTTP/1.1`), and
    /// forgets them.
    pub fn take_requests(&self) -> Vec<String> {
        self.server.take_requests()
    }
}

/// A real OCI registry on loopback (`docker-registry serve`), its storage
/// in a temporary directory, optionally requiring an htpasswd user.
pub struct Registry {
    child: Child,
    pub port: u16,
    login: Option<(String, String)>,
    dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry; with `login`, every request needs that user.
    pub fn start(login: Option<(&str, &str)>) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let port = crate::free_port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n  secret: tether-test\n",
            dir.path().join("data").display()
        );
        if let Some((user, password)) = login {
            let htpasswd = dir.path().join("htpasswd");
            let line = run_ok(Command::new("htpasswd").args(["-Bbn", user, password]));
            std::fs::write(&htpasswd, line).unwrap();
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: tether-test\n    path: {}\n",
                htpasswd.display()
            ));
        }
        let config_file = dir.path().join("config.yml");
        std::fs::write(&config_file, config).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config_file)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("registry.log")).unwrap())
            .spawn()
            .expect("docker-registry is not installed: run scripts/setup.sh");
        let registry = Registry {
            child,
            port,
            login: login.map(|(u, p)| (u.to_string(), p.to_string())),
            dir,
        };
        registry.wait_ready();
        registry
    }

    /// `oci://127.0.0.1:PORT/PATH`.
    pub fn url(&self, path: &str) -> String {
        format!("oci://127.0.0.1:{}/{path}", self.port)
    }

    /// `helm push`es `chart` (packaged) under `path`; returns the
    /// manifest's digest that helm printed.
    pub fn push(&self, chart: &Chart, path: &str) -> String {
        let out = tempfile::tempdir().unwrap();
        self.push_archive(&chart.package(out.path()), path)
    }

    /// `push`, signed by `signer`: helm pushes the `.prov` as the
    /// manifest's provenance layer.
    pub fn push_signed(&self, chart: &Chart, path: &str, signer: &ChartSigner) -> String {
        let out = tempfile::tempdir().unwrap();
        self.push_archive(&chart.package_signed(out.path(), signer), path)
    }

    fn push_archive(&self, archive: &Path, path: &str) -> String {
        let config = self.dir.path().join("helm-registry.json");
        let helm_here = || {
            let mut helm = helm();
            helm.env("HELM_REGISTRY_CONFIG", &config);
            helm
        };
        if let Some((user, password)) = &self.login {
            crate::run::run_ok_with_stdin(
                helm_here()
                    .args(["registry", "login", &format!("127.0.0.1:{}", self.port)])
                    .args(["--plain-http", "-u", user, "--password-stdin"]),
                password,
            );
        }
        let output = helm_here()
            .arg("push")
            .arg(archive)
            .arg(self.url(path))
            .arg("--plain-http")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "helm push: {text}");
        text.lines()
            .find_map(|line| line.strip_prefix("Digest: "))
            .unwrap_or_else(|| panic!("helm push printed no digest: {text}"))
            .trim()
            .to_string()
    }

    /// Pushes `files` (path, text) as an OCI artifact to `path:tag` the way
    /// `flux push artifact` lays one out (a config of Flux's media type, one
    /// tar+gzip layer of the files at its root), over the distribution API
    /// with `curl`; returns the manifest's digest.
    pub fn push_artifact(&self, files: &[(&str, &str)], path: &str, tag: &str) -> String {
        let work = tempfile::tempdir().unwrap();
        let root = work.path().join("root");
        for (file, text) in files {
            let file = root.join(file);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(file, text).unwrap();
        }
        let layer = work.path().join("layer.tgz");
        run_ok(
            Command::new("tar")
                .arg("-czf")
                .arg(&layer)
                .arg("-C")
                .arg(&root)
                .arg("."),
        );
        let config = work.path().join("config.json");
        std::fs::write(&config, "{}").unwrap();
        let layer_digest = self.upload(path, &layer);
        let config_digest = self.upload(path, &config);
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.cncf.flux.config.v1+json",
                "digest": config_digest, "size": 2},
            "layers": [{"mediaType": "application/vnd.cncf.flux.content.v1.tar+gzip",
                "digest": layer_digest, "size": std::fs::metadata(&layer).unwrap().len()}],
            "annotations": {"org.opencontainers.image.revision": format!("main@sha1:{tag}")},
        })
        .to_string();
        let manifest_file = work.path().join("manifest.json");
        std::fs::write(&manifest_file, &manifest).unwrap();
        self.curl()
            .args([
                "-X",
                "PUT",
                "-H",
                "Content-Type: application/vnd.oci.image.manifest.v1+json",
            ])
            .arg("--data-binary")
            .arg(format!("@{}", manifest_file.display()))
            .arg(format!(
                "http://127.0.0.1:{}/v2/{path}/manifests/{tag}",
                self.port
            ))
            .status()
            .unwrap()
            .success()
            .then_some(())
            .expect("the manifest pushed");
        digest_of(manifest.as_bytes())
    }

    /// Uploads `file` as a blob of repository `path` (a monolithic upload);
    /// returns its digest.
    fn upload(&self, path: &str, file: &Path) -> String {
        let digest = digest_of(&std::fs::read(file).unwrap());
        let headers = run_ok(
            self.curl()
                .args(["-X", "POST", "-D", "-", "-o", "/dev/null"])
                .arg(format!(
                    "http://127.0.0.1:{}/v2/{path}/blobs/uploads/",
                    self.port
                )),
        );
        let location = header(&headers, "location")
            .unwrap_or_else(|| panic!("no upload location in {headers}"));
        let location = match location.starts_with("http") {
            true => location,
            false => format!("http://127.0.0.1:{}{location}", self.port),
        };
        let separator = if location.contains('?') { '&' } else { '?' };
        run_ok(
            self.curl()
                .args(["-X", "PUT", "-H", "Content-Type: application/octet-stream"])
                .arg("--data-binary")
                .arg(format!("@{}", file.display()))
                .arg(format!("{location}{separator}digest={digest}")),
        );
        digest
    }

    /// `curl` with the registry's login, failing on HTTP errors.
    fn curl(&self) -> Command {
        let mut curl = Command::new("curl");
        curl.args(["-sS", "--fail"]);
        if let Some((user, password)) = &self.login {
            curl.args(["-u", &format!("{user}:{password}")]);
        }
        curl
    }

    /// The file holding blob `digest` in the registry's storage (to tamper
    /// with it).
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// The registry's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "registry did not start: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `sha256:` and the hex SHA-256 of `bytes`.
fn digest_of(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}
