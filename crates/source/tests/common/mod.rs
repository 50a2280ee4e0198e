//! Shared by the source crate's tests. The real components they run (the
//! `git` CLI, `git daemon`, repositories, `git http-backend` behind a tiny
//! CGI server and `sshd`, all on 127.0.0.1) come from the test kit.
#![allow(dead_code)]

pub fn config_map(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: shop\ndata:\n  key: value\n"
    )
}
