//! Git servers for tests that need a real transport: `git http-backend`
//! behind a tiny HTTP(S) server with basic authentication ([`HttpBackend`],
//! [`TestCa`]) and a real OpenSSH server ([`sshd::Sshd`]), all on
//! 127.0.0.1 and stopped when their handle drops.

mod http;
pub mod sshd;

pub use http::{HttpBackend, TestCa};
