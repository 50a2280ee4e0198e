//! Test support: one real local control plane per test process, a fresh
//! namespace per test, real Git repositories and waiting helpers.
//!
//! The control plane is `tools/kube-local` (etcd, kube-apiserver,
//! kube-controller-manager and a fake kubelet, built from upstream Go
//! modules). It is started on first use and stops by itself when the test
//! process exits: kube-local watches its stdin, and the kernel closes that
//! pipe however the test process ends.
//!
//! Set `TETHER_TEST_KUBECONFIG` to run against a control plane that is
//! already up instead (e.g. one started by hand with `kube-local up`). The
//! ordinary `KUBECONFIG` is deliberately not used: it usually points at a
//! real cluster, and tests create and delete things.

pub mod git_server;
mod log;
mod modules;
mod namespace;
mod plane;
mod repo;
mod requests;
mod wait;

pub use log::{log_file, log_tail};
pub use modules::ModuleGraph;
pub use namespace::{TestNamespace, client_for};
pub use plane::{ControlPlane, control_plane, repo_root};
pub use repo::Repo;
pub use requests::{Requests, recording_client};
pub use wait::{PATIENCE, eventually};
