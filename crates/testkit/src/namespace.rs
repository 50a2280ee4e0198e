//! A namespace of its own for each test, deleted when the test ends.

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, Resource};
use serde::de::DeserializeOwned;

use crate::control_plane;
use crate::run::{run_ok, run_ok_with_stdin, run_with_stdin};

/// A namespace created for one test on the shared control plane.
pub struct TestNamespace {
    pub name: String,
    pub client: Client,
    pub kubeconfig: PathBuf,
}

impl TestNamespace {
    /// Creates `<prefix>-<unique suffix>` and a client for the control plane.
    pub async fn create(prefix: &str) -> TestNamespace {
        let plane = control_plane();
        let kubeconfig = plane.kubeconfig().to_path_buf();
        let client = client_for(&kubeconfig).await;
        let name = unique_name(prefix);
        let namespace: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"tether.dev/test": "true"}}
        }))
        .expect("namespace manifest");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|error| panic!("creating namespace {name}: {error}"));
        TestNamespace {
            name,
            client,
            kubeconfig,
        }
    }

    /// The API of namespaced kind `K` in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Object `name` of kind `K` in this namespace, which must exist.
    pub async fn get<K>(&self, name: &str) -> K
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        self.get_opt(name)
            .await
            .unwrap_or_else(|| panic!("getting {name} in {}: not found", self.name))
    }

    /// Object `name` of kind `K` in this namespace, if it exists.
    pub async fn get_opt<K>(&self, name: &str) -> Option<K>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        self.api::<K>()
            .get_opt(name)
            .await
            .unwrap_or_else(|error| panic!("getting {name} in {}: {error}", self.name))
    }

    /// Every object of kind `K` in this namespace.
    pub async fn list<K>(&self) -> Vec<K>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        self.api::<K>()
            .list(&Default::default())
            .await
            .unwrap_or_else(|error| panic!("listing in {}: {error}", self.name))
            .items
    }

    /// Runs the real `kubectl` against the control plane in this namespace.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_as(&self.kubeconfig, args)
    }

    /// Runs `kubectl ARGS`, which must succeed (else the test fails with
    /// kubectl's stderr); returns its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        self.kubectl_ok_as(&self.kubeconfig, args)
    }

    /// Runs `kubectl ARGS` in this namespace as the user of `kubeconfig`.
    pub fn kubectl_as(&self, kubeconfig: &Path, args: &[&str]) -> Output {
        self.kubectl_command_as(kubeconfig, args)
            .output()
            .expect("kubectl is installed")
    }

    /// [`Self::kubectl_ok`] as the user of `kubeconfig`.
    pub fn kubectl_ok_as(&self, kubeconfig: &Path, args: &[&str]) -> String {
        run_ok(&mut self.kubectl_command_as(kubeconfig, args))
    }

    /// `kubectl get OBJECT -o jsonpath=PATH`, trimmed (empty if kubectl fails,
    /// e.g. while the object does not exist yet).
    pub fn jsonpath(&self, object: &str, path: &str) -> String {
        let output = self.kubectl(&["get", object, "-o", &format!("jsonpath={path}")]);
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// Runs `kubectl` with `input` on its standard input (`create -f -`).
    pub fn kubectl_with_stdin(&self, args: &[&str], input: &str) -> Output {
        run_with_stdin(&mut self.kubectl_command(args), input)
    }

    /// [`Self::kubectl_with_stdin`], which must succeed; returns its stdout.
    pub fn kubectl_ok_with_stdin(&self, args: &[&str], input: &str) -> String {
        run_ok_with_stdin(&mut self.kubectl_command(args), input)
    }

    /// A `kubectl` command for this namespace, to add environment or stdin.
    pub fn kubectl_command(&self, args: &[&str]) -> Command {
        self.kubectl_command_as(&self.kubeconfig, args)
    }

    /// A `kubectl` command in this namespace as the user of `kubeconfig`.
    pub fn kubectl_command_as(&self, kubeconfig: &Path, args: &[&str]) -> Command {
        let mut command = Command::new("kubectl");
        command
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--namespace", &self.name])
            .args(args);
        command
    }

    /// A certificate user `user` in group `tenants`, bound in this namespace
    /// only (one RoleBinding each) to every ClusterRole of `cluster_roles`;
    /// returns the user's kubeconfig. RBAC sees new bindings a moment later.
    pub fn user_with_roles(&self, user: &str, cluster_roles: &[&str]) -> PathBuf {
        let kubeconfig = control_plane().user_kubeconfig(user, &["tenants"]);
        for role in cluster_roles {
            self.kubectl_ok(&[
                "create",
                "rolebinding",
                &format!("{user}-{role}"),
                &format!("--clusterrole={role}"),
                &format!("--user={user}"),
            ]);
        }
        kubeconfig
    }

    /// A client acting as ServiceAccount `name` of this namespace (the
    /// admin impersonates it, with the groups the API server gives every
    /// service account), so exactly its RBAC applies.
    pub async fn client_as_service_account(&self, name: &str) -> Client {
        let mut config = config_for(&self.kubeconfig).await;
        config.auth_info.impersonate = Some(format!("system:serviceaccount:{}:{name}", self.name));
        config.auth_info.impersonate_groups = Some(vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{}", self.name),
            "system:authenticated".into(),
        ]);
        Client::try_from(config).expect("client builds")
    }

    /// The Git cache directory of a controller run for this namespace,
    /// removed with the namespace.
    pub fn cache_dir(&self) -> PathBuf {
        std::env::temp_dir().join(format!("tether-cache-{}", self.name))
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.cache_dir());
        let _ = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["delete", "namespace", &self.name, "--wait=false"])
            .output();
    }
}

/// A kube client for the cluster in `kubeconfig`.
pub async fn client_for(kubeconfig: &Path) -> Client {
    Client::try_from(config_for(kubeconfig).await).expect("client builds")
}

/// The client configuration in `kubeconfig`.
pub(crate) async fn config_for(kubeconfig: &Path) -> Config {
    let file = Kubeconfig::read_from(kubeconfig).expect("kubeconfig readable");
    Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig valid")
}

fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let seed = std::process::id()
        ^ nanos
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(2_654_435_761);
    let prefix: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    format!("{}-{:08x}", prefix.trim_matches('-'), seed)
}
