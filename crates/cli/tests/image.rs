//! The container image: `scripts/build-image.sh` builds it from the
//! `Containerfile` with buildah, and it runs as a pod runs it — as its
//! non-root user, the root filesystem read-only, only `/tmp` and
//! `/var/cache/tether` writable, no network — with `tether`, `helm` and
//! `kustomize` statically linked and the renderers confined by bubblewrap
//! inside it.
//!
//! Slow the first time (a release build of `tether`, minutes on two cores);
//! it reuses cargo's target directory and the cached helm and kustomize, so
//! a second run takes seconds. `scripts/test.sh` starts that release build
//! in the background before the other tests and runs this one last.
//! Needs root, as buildah's vfs storage does.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use tether_core::SyncStatus;
use tether_testkit::git_server::sshd::{KeyPair, Sshd};
use tether_testkit::in_cluster;
use tether_testkit::{Repo, application, client_for, repo_root, run_ok, status_where};

/// What the image may weigh compressed (gzip layers, as a registry stores
/// it and a node pulls it).
const MAX_COMPRESSED_BYTES: u64 = 80 * 1000 * 1000;

#[test]
fn the_containerfile_builds_a_static_non_root_image_under_80_mb_whose_tether_runs_as_the_in_cluster_controller()
 {
    let dir = tempfile::tempdir().unwrap();
    // The image's user must reach the unpacked image and the examples.
    chmod(dir.path(), 0o755);

    // Build the image in storage of this test's own, under a tag of its own;
    // at the lowest priority, so that a cold release build (minutes of both
    // cores) yields to whatever else runs, tests that wait on deadlines too.
    let started = Instant::now();
    let archive = dir.path().join("tether.tar");
    let tag = format!("localhost/tether-test-{}:test", std::process::id());
    let stdout = run_ok(
        Command::new("nice")
            .args(["-n", "19"])
            .arg(repo_root().join("scripts/build-image.sh"))
            .arg("--output")
            .arg(&archive)
            .env("TAG", &tag)
            .env("TETHER_IMAGE_STORAGE", dir.path().join("storage")),
    );
    let image = Image::unpack(&archive, dir.path());
    eprintln!(
        "image built in {:.0} s: {:.1} MiB uncompressed, {:.1} MiB compressed (gzip)",
        started.elapsed().as_secs_f64(),
        image.uncompressed as f64 / 1048576.0,
        image.compressed as f64 / 1048576.0
    );

    // The script reports what the archive holds, and it fits.
    assert_eq!(figure(&stdout, "compressed"), image.compressed, "{stdout}");
    assert_eq!(figure(&stdout, "uncompressed"), image.uncompressed);
    assert!(
        image.compressed < MAX_COMPRESSED_BYTES,
        "{} bytes compressed",
        image.compressed
    );

    // Its configuration: a numeric non-root user, tether as the entrypoint,
    // the cache where the Deployment mounts its volume, OCI labels.
    let config = &image.config["config"];
    let (uid, gid) = image.user();
    assert_ne!(uid, 0, "the image runs as root");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/local/bin/tether"])
    );
    let env = image.env();
    assert!(
        env.iter()
            .any(|e| e == "TETHER_CACHE_DIR=/var/cache/tether"),
        "{env:?}"
    );
    let labels = &config["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");

    // Its programs need nothing from a distribution.
    for program in ["tether", "helm", "kustomize"] {
        let path = image.rootfs.join("usr/local/bin").join(program);
        let ldd = Command::new("ldd").arg(&path).output().unwrap();
        let said = String::from_utf8_lossy(&ldd.stdout) + String::from_utf8_lossy(&ldd.stderr);
        assert!(
            said.contains("statically linked") || said.contains("not a dynamic executable"),
            "{program}: {said}"
        );
    }
    let cache = image.rootfs.join("var/cache/tether");
    assert_eq!(
        owner(&cache),
        (uid, gid),
        "the cache belongs to the image's user"
    );

    // It runs them.
    let version = image.run(&["--version"]);
    assert_eq!(
        version.trim(),
        format!("tether {}", env!("CARGO_PKG_VERSION"))
    );
    let helm = image.run_program("/usr/local/bin/helm", &["version", "--short"]);
    assert!(helm.starts_with("v3."), "{helm}");
    let kustomize = image.run_program("/usr/local/bin/kustomize", &["version"]);
    assert!(kustomize.starts_with("v5."), "{kustomize}");

    // It renders Kustomize, Helm and Jsonnet with the renderer sandbox
    // required (bubblewrap inside the container), writing only to /tmp.
    for (path, renderer, more, kind) in [
        ("kustomize-guestbook/base", "kustomize", &[][..], "Service"),
        (
            "helm-dependency",
            "helm",
            &["--release-name", "shop"][..],
            "ConfigMap",
        ),
        (
            "jsonnet-guestbook",
            "jsonnet",
            &["--jsonnet-main", "guestbook.jsonnet", "--tla", "name=shop"][..],
            "Deployment",
        ),
    ] {
        let path = format!("/tmp/inputs/examples/{path}");
        let args = [
            &["render", "--path", &path, "--renderer", renderer][..],
            more,
        ]
        .concat();
        let rendered = image.run(&args);
        assert!(rendered.contains(&format!("kind: {kind}")), "{rendered}");
    }

    // Its tether is the controller in a cluster.
    controls_a_cluster(&image.rootfs.join("usr/local/bin/tether"));

    // It fetches over SSH with a deploy key, as its user, with the ssh it
    // carries (on the host's loopback network for this one run).
    let key = KeyPair::generate(dir.path(), "deploy");
    let sshd = Sshd::start(&[&key]);
    let repo = Repo::at(&dir.path().join("repo"));
    let guestbook = repo_root().join("examples/first-hour/guestbook");
    for file in ["guestbook-ui-deployment.yaml", "guestbook-ui-svc.yaml"] {
        repo.write(
            file,
            &std::fs::read_to_string(guestbook.join(file)).unwrap(),
        );
    }
    repo.commit_all("guestbook");
    let bare = repo.publish("guestbook").join("guestbook.git");
    // JSON is YAML: the credentials file `tether render` reads.
    let credentials = json!({"sshPrivateKey": key.private, "knownHosts": sshd.known_hosts});
    std::fs::write(image.inputs.join("ssh.yaml"), credentials.to_string()).unwrap();
    let fetched = image.run_on_loopback(&[
        "render",
        "--repo",
        &sshd.url(&bare),
        "--path",
        ".",
        "--credentials",
        "/tmp/inputs/ssh.yaml",
    ]);
    assert!(fetched.contains("kind: Deployment"), "{fetched}");
    assert!(sshd.log().contains("Accepted publickey"), "{}", sshd.log());
}

/// `tether install --image` with `tether` (the image's static binary) as
/// the image: two replicas of it on kube-local's exec kubelet — host
/// processes in namespaces of their own, with in-cluster configuration
/// only, though not on the image's root filesystem — elect a leader, and
/// the leader syncs an Application.
fn controls_a_cluster(tether: &Path) {
    // Outside /tmp, which the controller's pods mount an emptyDir over.
    let work = in_cluster::workspace(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let program = work.path().join("tether");
    std::fs::copy(tether, &program).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let plane = in_cluster::plane(&work.path().join("plane"), &program);
        let admin = plane.kubeconfig();
        let client = client_for(admin).await;
        in_cluster::install(&program, admin, in_cluster::IMAGE, &[]);
        let ready = in_cluster::ready(&client, 2).await;
        eprintln!("the image's tether: 2 replicas ready {:.1} s after the install", ready.as_secs_f64());
        let repo = Repo::at(&work.path().join("repo"));
        let head = repo.commit(
            &[(
                "app/greeting.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\ndata:\n  greeting: hello\n",
            )],
            "first",
        );
        run_ok(
            Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(admin)
                .args(["create", "namespace", "shop"]),
        );
        let apps = application("shop", "shop", &repo.url(), "app").apply(&client).await;
        status_where(&apps, "Synced by the image's tether", |status| {
            status.sync.status == SyncStatus::Synced && status.sync.revision.as_deref() == Some(&head)
        })
        .await;
    });
}

/// An image from an OCI archive: its configuration, its sizes and its
/// file tree, unpacked next to the archive; beside it the inputs it is
/// shown at `/tmp/inputs` (the first-hour examples) and its cache.
struct Image {
    config: Value,
    compressed: u64,
    uncompressed: u64,
    rootfs: PathBuf,
    inputs: PathBuf,
    cache: PathBuf,
}

impl Image {
    fn unpack(archive: &Path, dir: &Path) -> Image {
        let layout = dir.join("layout");
        let rootfs = dir.join("rootfs");
        std::fs::create_dir_all(&layout).unwrap();
        std::fs::create_dir_all(&rootfs).unwrap();
        run_ok(
            Command::new("tar")
                .arg("-xf")
                .arg(archive)
                .arg("-C")
                .arg(&layout),
        );
        let blob = |digest: &Value| {
            let digest = digest.as_str().unwrap().replacen(':', "/", 1);
            layout.join("blobs").join(digest)
        };
        let json = |path: PathBuf| -> Value {
            serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
        };
        let index = json(layout.join("index.json"));
        let manifest = json(blob(&index["manifests"][0]["digest"]));
        let config_size = manifest["config"]["size"].as_u64().unwrap();
        let mut compressed = config_size;
        let mut uncompressed = config_size;
        for layer in manifest["layers"].as_array().unwrap() {
            compressed += layer["size"].as_u64().unwrap();
            let tar = run_ok(Command::new("sh").arg("-c").arg(format!(
                "gzip -dc '{}' | wc -c",
                blob(&layer["digest"]).display()
            )));
            uncompressed += tar.trim().parse::<u64>().unwrap();
            // As root, tar keeps the layer's owners (the cache's user).
            run_ok(
                Command::new("tar")
                    .arg("-xzf")
                    .arg(blob(&layer["digest"]))
                    .arg("-C")
                    .arg(&rootfs),
            );
        }
        let inputs = dir.join("inputs");
        std::fs::create_dir(&inputs).unwrap();
        run_ok(
            Command::new("cp")
                .arg("-r")
                .arg(repo_root().join("examples/first-hour"))
                .arg(inputs.join("examples")),
        );
        let cache = dir.join("cache");
        std::fs::create_dir(&cache).unwrap();
        let image = Image {
            config: json(blob(&manifest["config"]["digest"])),
            compressed,
            uncompressed,
            rootfs,
            inputs,
            cache,
        };
        let (uid, gid) = image.user();
        std::os::unix::fs::chown(&image.cache, Some(uid), Some(gid)).unwrap();
        image
    }

    /// The numeric `uid:gid` the image runs as.
    fn user(&self) -> (u32, u32) {
        let user = self.config["config"]["User"].as_str().unwrap_or("");
        let (uid, gid) = user.split_once(':').unwrap_or((user, user));
        let numeric = |id: &str| {
            id.parse::<u32>()
                .unwrap_or_else(|_| panic!("the image's user {user:?} is not numeric uid:gid"))
        };
        (numeric(uid), numeric(gid))
    }

    fn env(&self) -> Vec<String> {
        let env = self.config["config"]["Env"].as_array().unwrap();
        env.iter()
            .map(|e| e.as_str().unwrap().to_string())
            .collect()
    }

    /// The entrypoint with `args`: [`Image::run_program`] of tether.
    fn run(&self, args: &[&str]) -> String {
        self.run_with(Network::None, self.entrypoint(), args)
    }

    /// [`Image::run`] on the host's network, to reach a server on loopback.
    fn run_on_loopback(&self, args: &[&str]) -> String {
        self.run_with(Network::Host, self.entrypoint(), args)
    }

    fn run_program(&self, program: &str, args: &[&str]) -> String {
        self.run_with(Network::None, program, args)
    }

    fn entrypoint(&self) -> &str {
        self.config["config"]["Entrypoint"][0].as_str().unwrap()
    }

    /// Runs `program args` in the image as a pod would: as the image's
    /// user with its environment, the root filesystem read-only, a fresh
    /// `/tmp` (with the inputs) and the cache directory writable, and every
    /// namespace new, the network's too unless `network` says otherwise.
    /// bubblewrap stands in for the container runtime.
    fn run_with(&self, network: Network, program: &str, args: &[&str]) -> String {
        let (uid, gid) = self.user();
        let mut command = Command::new("setpriv");
        command
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .arg("--clear-groups")
            .args(["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind"])
            .arg(&self.rootfs)
            .args(["/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"])
            .arg("--bind")
            .arg(&self.cache)
            .arg("/var/cache/tether")
            .arg("--ro-bind")
            .arg(&self.inputs)
            .arg("/tmp/inputs")
            .args(["--chdir", "/tmp", "--clearenv"]);
        if network == Network::Host {
            command.arg("--share-net");
        }
        for pair in self.env() {
            let (name, value) = pair.split_once('=').unwrap();
            command.args(["--setenv", name, value]);
        }
        command.arg("--").arg(program).args(args);
        run_ok(&mut command)
    }
}

/// Which network a program in the image sees.
#[derive(PartialEq)]
enum Network {
    None,
    Host,
}

/// The number on the script's output line `NAME NUMBER`.
fn figure(stdout: &str, name: &str) -> u64 {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} line in {stdout}"))
        .parse()
        .unwrap()
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn owner(path: &Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let metadata = std::fs::metadata(path).unwrap();
    (metadata.uid(), metadata.gid())
}
