//! A fault-injecting HTTP proxy between Tether and the API server, on
//! loopback: it forwards every request to the real control plane (through
//! the admin client, which adds TLS and credentials) and, on demand,
//! delays requests, answers 429 with `Retry-After` or 5xx, cuts the watch
//! streams in flight, or black-holes everything (requests hang, streams
//! end) until told to stop — what an overloaded, restarting or partitioned
//! API server looks like from the controller's side. It records every
//! request, so a test can count the LISTs and the requests a recovery cost.
//!
//! Tether talks plain HTTP to the proxy ([`FaultProxy::client`], or the
//! kubeconfig [`FaultProxy::write_kubeconfig`] writes for a controller run
//! as its own process).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use kube::Client;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::task::AbortOnDropHandle;

type ProxyBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// What the proxy does to requests now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Fault {
    /// Forward everything as it is.
    #[default]
    Pass,
    /// Wait this long before forwarding each request.
    Delay(Duration),
    /// Answer one request in `every` with this status (429, 500, 503 …)
    /// and, if set, a `Retry-After` of that many seconds; forward the rest.
    /// Watches are answered too: a throttled server refuses them alike.
    Status {
        code: u16,
        retry_after: Option<u64>,
        every: u32,
    },
    /// Answer nothing: requests hang until the fault is lifted, and the
    /// watch streams in flight end (an API server gone, or partitioned).
    BlackHole,
}

/// The kind of a request, as a controller's costs are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    List,
    Watch,
    Get,
    Write,
}

/// One request the proxy saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub at: Instant,
    pub verb: Verb,
    pub method: String,
    /// Path and query.
    pub target: String,
    /// The status the proxy answered with (0 when it black-holed or the
    /// upstream failed).
    pub status: u16,
}

struct State {
    fault: Mutex<Fault>,
    counter: Mutex<u32>,
    seen: Mutex<Vec<Seen>>,
    /// Bumped to end the watch streams in flight.
    cuts: watch::Sender<u64>,
    /// Bumped whenever the fault changes, to wake black-holed requests.
    changes: watch::Sender<u64>,
}

/// A running fault proxy; it stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<State>,
    _task: AbortOnDropHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy in front of the API server that `upstream` talks to.
    pub async fn start(upstream: Client) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let state = Arc::new(State {
            fault: Mutex::new(Fault::Pass),
            counter: Mutex::new(0),
            seen: Mutex::new(Vec::new()),
            cuts: watch::channel(0).0,
            changes: watch::channel(0).0,
        });
        let serving = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = serving.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let state = state.clone();
                        let upstream = upstream.clone();
                        async move { Ok::<_, Infallible>(handle(&state, &upstream, request).await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        FaultProxy {
            addr,
            state,
            _task: AbortOnDropHandle::new(task),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A client that talks to the API server through this proxy, built as
    /// Tether builds its own (kube's defaults, including its retry of 429
    /// and 503 that honours `Retry-After`).
    pub fn client(&self) -> Client {
        let config = kube::Config::new(self.url().parse().expect("proxy URL"));
        Client::try_from(config).expect("client builds")
    }

    /// Writes a kubeconfig for this proxy to `path`, for a controller run
    /// as its own process (`tether run --kubeconfig`).
    pub fn write_kubeconfig(&self, path: &Path) {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: {}\n\
             users:\n- name: proxy\n  user: {{}}\ncontexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: proxy\n\
             current-context: proxy\n",
            self.url()
        );
        std::fs::write(path, text).expect("kubeconfig written");
    }

    /// From now on, `fault`.
    pub fn set(&self, fault: Fault) {
        let black_hole = fault == Fault::BlackHole;
        *self.state.fault.lock().expect("lock") = fault;
        self.state.changes.send_modify(|n| *n += 1);
        if black_hole {
            self.cut_watches();
        }
    }

    /// Forward everything again.
    pub fn clear(&self) {
        self.set(Fault::Pass);
    }

    /// Ends every watch stream in flight (the client sees its stream end
    /// mid-watch, as when an API server restarts or a load balancer drops
    /// long connections).
    pub fn cut_watches(&self) {
        self.state.cuts.send_modify(|n| *n += 1);
    }

    /// Every request seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().expect("lock").clone()
    }

    /// The requests seen since `since`.
    pub fn seen_since(&self, since: Instant) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.at >= since).collect()
    }
}

async fn handle(
    state: &State,
    upstream: &Client,
    request: hyper::Request<Incoming>,
) -> hyper::Response<ProxyBody> {
    let target = request.uri().path_and_query().map_or_else(
        || request.uri().path().to_string(),
        |p| p.as_str().to_string(),
    );
    let method = request.method().to_string();
    let verb = classify(&method, &target);
    let at = Instant::now();
    let record = |status: u16| {
        state.seen.lock().expect("lock").push(Seen {
            at,
            verb,
            method: method.clone(),
            target: target.clone(),
            status,
        });
    };
    if let Some((code, retry_after)) = inject(state).await {
        record(code);
        return refusal(code, retry_after);
    }
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            record(0);
            return refusal(502, None);
        }
    };
    let forwarded = http::Request::from_parts(parts, kube::client::Body::from(body.to_vec()));
    let response = match upstream.send(forwarded).await {
        Ok(response) => response,
        Err(_) => {
            record(0);
            return refusal(502, None);
        }
    };
    record(response.status().as_u16());
    cuttable(state, response)
}

/// The fault set now, carried out on one request before it is forwarded:
/// a delay, a wait while the proxy is a black hole, or the status code
/// (and `Retry-After`) to refuse it with instead.
async fn inject(state: &State) -> Option<(u16, Option<u64>)> {
    let fault = state.fault.lock().expect("lock").clone();
    match fault {
        Fault::Pass => None,
        Fault::Delay(delay) => {
            tokio::time::sleep(delay).await;
            None
        }
        Fault::Status {
            code,
            retry_after,
            every,
        } => {
            let mut counter = state.counter.lock().expect("lock");
            *counter += 1;
            (*counter)
                .is_multiple_of(every.max(1))
                .then_some((code, retry_after))
        }
        Fault::BlackHole => {
            let mut changes = state.changes.subscribe();
            while *state.fault.lock().expect("lock") == Fault::BlackHole {
                if changes.changed().await.is_err() {
                    break;
                }
            }
            None
        }
    }
}

/// `response` passed on to the client, its body streamed until it ends or
/// the proxy cuts open connections.
fn cuttable(
    state: &State,
    response: http::Response<kube::client::Body>,
) -> hyper::Response<ProxyBody> {
    let (parts, body) = response.into_parts();
    let mut cuts = state.cuts.subscribe();
    cuts.mark_unchanged();
    let cut = async move {
        let _ = cuts.changed().await;
    };
    let frames = body
        .into_data_stream()
        .map(|chunk| {
            chunk
                .map(Frame::data)
                .map_err(|error| std::io::Error::other(error.to_string()))
        })
        .take_until(Box::pin(cut));
    hyper::Response::from_parts(parts, BodyExt::boxed_unsync(StreamBody::new(frames)))
}

/// A refusal as the API server writes one: a `Status` object.
fn refusal(code: u16, retry_after: Option<u64>) -> hyper::Response<ProxyBody> {
    let body = format!(
        r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the fault proxy","code":{code}}}"#
    );
    let mut response = hyper::Response::builder()
        .status(code)
        .header("content-type", "application/json");
    if let Some(seconds) = retry_after {
        response = response.header("retry-after", seconds.to_string());
    }
    response
        .body(
            Full::new(Bytes::from(body))
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
        .expect("a valid response")
}

/// LIST, WATCH, GET or a write, from the method and the path: a GET whose
/// path ends at a resource type (`/api/v1/namespaces/ns/pods`,
/// `/apis/apps/v1/deployments`) lists, one that names an object gets.
fn classify(method: &str, target: &str) -> Verb {
    if method != "GET" {
        return Verb::Write;
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if query
        .split('&')
        .any(|pair| pair == "watch=true" || pair == "watch=1")
    {
        return Verb::Watch;
    }
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // After /api/v1 or /apis/GROUP/VERSION: [namespaces, NS,] RESOURCE [, NAME [, SUB]].
    let rest = match segments.first() {
        Some(&"api") => segments.get(2..),
        Some(&"apis") => segments.get(3..),
        _ => None,
    }
    .unwrap_or(&[]);
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    if rest.len() == 1 {
        Verb::List
    } else {
        Verb::Get
    }
}

/// A TCP gate in front of another loopback server (a Git daemon): open, it
/// forwards connections; closed, it cuts the connections in flight and
/// drops new ones at once (a server that is down). It counts the
/// connections it was asked for, so a test can see a client's back-off.
pub struct TcpGate {
    pub port: u16,
    open: Arc<watch::Sender<bool>>,
    attempts: Arc<Mutex<Vec<Instant>>>,
    _task: AbortOnDropHandle<()>,
}

impl TcpGate {
    /// A gate in front of `127.0.0.1:upstream`, open.
    pub async fn start(upstream: u16) -> TcpGate {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let open = Arc::new(watch::channel(true).0);
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let (gate, log) = (open.clone(), attempts.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                log.lock().expect("lock").push(Instant::now());
                if !*gate.borrow() {
                    continue;
                }
                let mut closed = gate.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = closed.wait_for(|open| !*open) => {}
                    }
                });
            }
        });
        TcpGate {
            port,
            open,
            attempts,
            _task: AbortOnDropHandle::new(task),
        }
    }

    /// Down: cut what is in flight, refuse what comes.
    pub fn close(&self) {
        self.open.send_replace(false);
    }

    /// Up again.
    pub fn open(&self) {
        self.open.send_replace(true);
    }

    /// When each connection was asked for.
    pub fn attempts(&self) -> Vec<Instant> {
        self.attempts.lock().expect("lock").clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_told_apart_by_method_path_and_watch_flag() {
        assert_eq!(
            classify("GET", "/api/v1/namespaces/a/pods?limit=500"),
            Verb::List
        );
        assert_eq!(classify("GET", "/apis/apps/v1/deployments"), Verb::List);
        assert_eq!(classify("GET", "/api/v1/namespaces/a/pods/web"), Verb::Get);
        assert_eq!(classify("GET", "/api/v1/namespaces"), Verb::List);
        assert_eq!(classify("GET", "/api/v1/namespaces/a"), Verb::Get);
        assert_eq!(
            classify(
                "GET",
                "/apis/apps/v1/namespaces/a/deployments?watch=true&resourceVersion=5"
            ),
            Verb::Watch
        );
        assert_eq!(
            classify("PATCH", "/apis/apps/v1/namespaces/a/deployments/web"),
            Verb::Write
        );
    }
}
