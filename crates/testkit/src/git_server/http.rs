//! Smart HTTP: `git http-backend` run as CGI by a small server on
//! 127.0.0.1, optionally over TLS (a throwaway CA) and behind HTTP basic
//! authentication. The same server also serves plain files with `ETag`s
//! (a Helm chart repository: `index.yaml` and archives).

use std::io::{BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::received::{Received, read_request};

/// Smart HTTP: a small server that runs `git http-backend` as CGI for each
/// request, optionally over TLS and requiring HTTP basic authentication. It
/// records every request line (`GET /shop.git/info/refs?service=…`).
pub struct HttpBackend {
    pub port: u16,
    pub(crate) root: std::path::PathBuf,
    scheme: &'static str,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl HttpBackend {
    pub fn start(base: &Path, basic_auth: Option<(&str, &str)>) -> HttpBackend {
        HttpBackend::spawn(Handler::Git, base, basic_auth, None)
    }

    /// Serves over HTTPS with a certificate for 127.0.0.1 signed by `ca`.
    pub fn start_https(base: &Path, basic_auth: Option<(&str, &str)>, ca: &TestCa) -> HttpBackend {
        HttpBackend::spawn(
            Handler::Git,
            base,
            basic_auth,
            Some(ca.server_config.clone()),
        )
    }

    /// Serves the files under `root` (GET only; an `ETag` per file, `304`
    /// to a matching `If-None-Match`), over HTTPS when `ca` is given.
    pub fn serve_files(
        root: &Path,
        basic_auth: Option<(&str, &str)>,
        ca: Option<&TestCa>,
    ) -> HttpBackend {
        let tls = ca.map(|ca| ca.server_config.clone());
        HttpBackend::spawn(Handler::Files, root, basic_auth, tls)
    }

    /// `http(s)://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.port)
    }

    fn spawn(
        handler: Handler,
        base: &Path,
        basic_auth: Option<(&str, &str)>,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> HttpBackend {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let scheme = if tls.is_some() { "https" } else { "http" };
        let root = base.to_path_buf();
        let (base, stopped, log) = (base.to_path_buf(), stop.clone(), requests.clone());
        let expected = basic_auth.map(|(user, password)| {
            use base64::Engine;
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
            )
        });
        std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        let (base, expected, log) = (base.clone(), expected.clone(), log.clone());
                        let tls = tls.clone();
                        std::thread::spawn(move || match tls {
                            Some(config) => {
                                let Ok(connection) = rustls::ServerConnection::new(config) else {
                                    return;
                                };
                                let stream = rustls::StreamOwned::new(connection, stream);
                                serve(stream, handler, &base, expected.as_deref(), &log)
                            }
                            None => serve(stream, handler, &base, expected.as_deref(), &log),
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        HttpBackend {
            port,
            root,
            scheme,
            requests,
            stop,
        }
    }

    pub fn url(&self, name: &str) -> String {
        format!("{}://127.0.0.1:{}/{name}.git", self.scheme, self.port)
    }

    /// The request lines served so far, and forgets them.
    pub fn take_requests(&self) -> Vec<String> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }
}

impl Drop for HttpBackend {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// A throwaway certificate authority, and a server configuration whose
/// certificate for 127.0.0.1 it signed.
pub struct TestCa {
    pub ca_pem: String,
    server_config: Arc<rustls::ServerConfig>,
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Tether test CA");
        let ca =
            rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
                .unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let certificate = params.signed_by(&key, &ca).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let server_config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![certificate.der().clone()],
                rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
            )
            .unwrap();
        TestCa {
            ca_pem: ca.pem(),
            server_config: Arc::new(server_config),
        }
    }
}

impl Default for TestCa {
    fn default() -> TestCa {
        TestCa::new()
    }
}

/// What the server answers with.
#[derive(Debug, Clone, Copy)]
enum Handler {
    /// `git http-backend`.
    Git,
    /// The files under the base directory.
    Files,
}

fn serve(
    stream: impl Read + Write,
    handler: Handler,
    base: &Path,
    expected_auth: Option<&str>,
    log: &Mutex<Vec<String>>,
) {
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        log.lock()
            .unwrap()
            .push(logged(&request.line, &request.body));
        let reply = if expected_auth.is_some() && request.header("authorization") != expected_auth {
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\n\r\n".to_vec()
        } else {
            match handler {
                Handler::Files => file_reply(base, request.path(), request.header("if-none-match")),
                Handler::Git => cgi_reply(&http_backend(base, request)),
            }
        };
        if reader.get_mut().write_all(&reply).is_err() || reader.get_mut().flush().is_err() {
            return;
        }
    }
}

/// What `git http-backend`, run as CGI under `base`, writes for `request`.
fn http_backend(base: &Path, request: Received) -> Vec<u8> {
    let mut child = Command::new("git")
        .arg("http-backend")
        .env_clear()
        .env("GIT_PROJECT_ROOT", base)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", request.path())
        .env("QUERY_STRING", request.query())
        .env("REQUEST_METHOD", &request.method)
        .env(
            "CONTENT_TYPE",
            request.header("content-type").unwrap_or_default(),
        )
        .env("CONTENT_LENGTH", request.body.len().to_string())
        .env(
            "GIT_PROTOCOL",
            request.header("git-protocol").unwrap_or_default(),
        )
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let body = request.body;
    std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let mut output = Vec::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut output)
        .unwrap();
    let _ = child.wait();
    output
}

/// A CGI program's `output` (headers, a `Status:` among them, a blank
/// line, the body) as an HTTP/1.1 response.
fn cgi_reply(output: &[u8]) -> Vec<u8> {
    let split = output
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| output.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)))
        .unwrap_or((output.len(), 0));
    let (head, rest) = (
        String::from_utf8_lossy(&output[..split.0]).to_string(),
        &output[split.0 + split.1..],
    );
    let mut status = "200 OK".to_string();
    let mut headers = Vec::new();
    for line in head.lines() {
        if let Some(value) = line.strip_prefix("Status:") {
            status = value.trim().to_string();
        } else if !line.is_empty() {
            headers.extend_from_slice(format!("{line}\r\n").as_bytes());
        }
    }
    let mut reply = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", rest.len()).into_bytes();
    reply.extend(headers);
    reply.extend_from_slice(b"\r\n");
    reply.extend_from_slice(rest);
    reply
}

/// A file under `base` as an HTTP reply: its `ETag` is a hash of its
/// content; `304` when `if_none_match` is that tag; `404` for a missing
/// file or a path that climbs out.
fn file_reply(base: &Path, path: &str, if_none_match: Option<&str>) -> Vec<u8> {
    use std::hash::{Hash, Hasher};
    let relative = path.trim_start_matches('/');
    let bytes = (!relative.split('/').any(|part| part == ".."))
        .then(|| std::fs::read(base.join(relative)).ok())
        .flatten();
    let Some(bytes) = bytes else {
        return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec();
    };
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    let etag = format!("\"{:016x}-{}\"", hasher.finish(), bytes.len());
    if if_none_match == Some(etag.as_str()) {
        return format!("HTTP/1.1 304 Not Modified\r\nETag: {etag}\r\nContent-Length: 0\r\n\r\n")
            .into_bytes();
    }
    let mut reply = format!(
        "HTTP/1.1 200 OK\r\nETag: {etag}\r\nContent-Length: {}\r\n\r\n",
        bytes.len()
    )
    .into_bytes();
    reply.extend(bytes);
    reply
}

/// `GET /shop.git/info/refs?service=git-upload-pack`, or for a protocol v2
/// POST the command it carries: `POST /shop.git/git-upload-pack ls-refs`.
fn logged(request_line: &str, body: &[u8]) -> String {
    let line = request_line.trim_end().trim_end_matches(" HTTP/1.1");
    let body = String::from_utf8_lossy(body);
    match body.split_once("command=") {
        Some((_, rest)) => format!("{line} {}", rest.lines().next().unwrap_or("")),
        None => line.to_string(),
    }
}
