//! Test support: one real local control plane per test process, and a fresh
//! namespace per test.
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

mod log;
mod namespace;
mod plane;

pub use log::{log_file, log_tail};
pub use namespace::{TestNamespace, client_for};
pub use plane::{ControlPlane, control_plane, repo_root};
