//! Reading the controller's `/metrics` in the CLI's end-to-end tests: a
//! `tether run` serving HTTP, a ServiceAccount allowed to scrape it, and
//! the exposition's series by name and labels.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use tether_testkit::{TestNamespace, eventually};

use super::{Running, bind_cluster_role, run_controller_with, tether_ok};

/// `tether run` for `ns` as replica `identity`, serving HTTP on `port`.
pub fn run_serving(ns: &TestNamespace, identity: &str, port: u16) -> Running {
    run_serving_with(ns, identity, port, &[])
}

/// `run_serving` with more `tether run` arguments.
pub fn run_serving_with(ns: &TestNamespace, identity: &str, port: u16, more: &[&str]) -> Running {
    let addr = format!("127.0.0.1:{port}");
    let args = [&["--http-addr", addr.as_str()][..], more].concat();
    run_controller_with(ns, ns, identity, 30, &args)
}

/// What `GET /metrics` answered: the status code, the content type and
/// the body.
pub struct Answer {
    pub code: u16,
    pub content_type: String,
    pub body: String,
}

/// `GET /metrics` on loopback `port`, with `token` as bearer.
pub fn scrape(port: u16, token: Option<&str>) -> std::io::Result<Answer> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let authorization = token
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n{authorization}Connection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_default();
    let content_type = tether_testkit::header(head, "content-type").unwrap_or_default();
    // The body may come chunked: the exposition's lines are all we read,
    // and chunk sizes are not among them.
    let body = dechunk(body);
    Ok(Answer {
        code,
        content_type,
        body,
    })
}

/// A chunked HTTP/1.1 body, joined (a body that is not chunked is kept).
pub fn dechunk(body: &str) -> String {
    let mut rest = body;
    let mut joined = String::new();
    loop {
        let Some((size, after)) = rest.split_once("\r\n") else {
            return body.to_string();
        };
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            return body.to_string();
        };
        if size == 0 {
            return joined;
        }
        let Some(chunk) = after.get(..size) else {
            return body.to_string();
        };
        joined.push_str(chunk);
        rest = after[size..].trim_start_matches("\r\n");
    }
}

/// The controller's answer once it serves HTTP at all.
pub async fn answered(port: u16, token: Option<&str>) -> Answer {
    eventually("the controller serving HTTP", || async {
        scrape(port, token).ok()
    })
    .await
}

/// A ServiceAccount `name` in `ns` and a token for it.
pub fn service_account_token(ns: &TestNamespace, name: &str) -> String {
    ns.kubectl_ok(&["create", "serviceaccount", name]);
    ns.kubectl_ok(&["create", "token", name, "--duration", "1h"])
        .trim()
        .to_string()
}

/// Binds the ServiceAccount `name` of `ns` to `tether-metrics-reader`.
pub fn bind_metrics_reader(ns: &TestNamespace, name: &str) {
    bind_cluster_role(
        ns,
        "clusterrolebinding",
        &format!("metrics-{}-{name}", ns.name),
        "tether-metrics-reader",
        &format!("{}:{name}", ns.name),
    );
}

/// The series of `metric` in an exposition: labels by name, and the value.
pub fn series(body: &str, metric: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    body.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(metric)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(rest) => rest.rsplit_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            let labels = labels
                .split("\",")
                .filter(|pair| !pair.is_empty())
                .filter_map(|pair| {
                    let (name, value) = pair.split_once("=\"")?;
                    Some((name.to_string(), value.trim_end_matches('"').to_string()))
                })
                .collect();
            Some((labels, value.trim().parse().ok()?))
        })
        .collect()
}

/// A reader of `/metrics`: Tether installed in a new namespace, its
/// controller serving HTTP, and a ServiceAccount bound to
/// `tether-metrics-reader` with its token.
pub async fn installed(prefix: &str) -> (TestNamespace, String) {
    let ns = TestNamespace::create(prefix).await;
    tether_ok(&ns, &["install", "--namespace", &ns.name]);
    let token = service_account_token(&ns, "prometheus");
    bind_metrics_reader(&ns, "prometheus");
    (ns, token)
}
