//! Push webhooks as a forge sends them: a GitHub push event, signed with
//! the shared secret (`X-Hub-Signature-256`), posted to `tether run`'s
//! `/webhook/github`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Posts a signed GitHub push of `refs/heads/main` for `repo_url`, with
/// one commit's `[added, modified, removed]` paths when given; returns the
/// HTTP status.
pub fn post_github_push(
    addr: SocketAddr,
    secret: &str,
    repo_url: &str,
    changed: Option<[Vec<String>; 3]>,
) -> std::io::Result<u16> {
    let mut body =
        serde_json::json!({"ref": "refs/heads/main", "repository": {"clone_url": repo_url}});
    if let Some([added, modified, removed]) = changed {
        body["commits"] =
            serde_json::json!([{"added": added, "modified": modified, "removed": removed}]);
    }
    let body = body.to_string();
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(body.as_bytes());
    let signature = hex::encode(mac.finalize().into_bytes());
    let mut stream = TcpStream::connect(addr)?;
    write!(
        stream,
        "POST /webhook/github HTTP/1.1\r\nHost: {addr}\r\nX-GitHub-Event: push\r\n\
         X-Hub-Signature-256: sha256={signature}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    response
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no HTTP status line in {response:?}")))
}
