//! Test support: one real local control plane per test process, a fresh
//! namespace per test, real Git repositories and servers, a webhook
//! receiver, the real tools run so that a failure shows their own words, a
//! real Prometheus, and waiting helpers. With the `controller` feature:
//! Application fixtures and their status.
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

#[cfg(feature = "controller")]
mod app;
mod assert;
pub mod browser;
pub mod charts;
mod daemon;
pub mod fault_proxy;
#[cfg(feature = "controller")]
pub mod faults;
mod files;
mod fixtures;
pub mod fuzz;
pub mod git_server;
mod hostile;
mod http_head;
#[cfg(feature = "controller")]
pub mod in_cluster;
mod log;
mod modules;
mod namespace;
#[cfg(feature = "controller")]
mod notice;
mod plane;
pub mod prometheus;
mod received;
mod receiver;
mod repo;
mod requests;
pub mod run;
mod wait;

#[cfg(feature = "controller")]
pub use app::{AppFixture, application, condition, has_condition, status_of, status_where};
pub use assert::{assert_contains, assert_starts_with};
pub use daemon::{GitDaemon, free_port, wait_for};
pub use files::{write_file, write_script};
pub use fixtures::crd;
pub use hostile::{alias_bomb, alias_document};
pub use http_head::header;
pub use log::{log_file, log_tail};
pub use modules::ModuleGraph;
pub use namespace::{TestNamespace, client_for};
#[cfg(feature = "controller")]
pub use notice::notice;
pub use plane::{Component, ControlPlane, Launch, control_plane, repo_root};
pub use received::Received;
pub use receiver::{Answer, Receiver};
pub use repo::Repo;
pub use requests::{Requests, recording_client};
pub use run::{git, git_command, run_ok, run_ok_with_stdin, run_with_stdin};
pub use wait::{PATIENCE, eventually, object_where};

pub mod tools;
pub mod webhook;
