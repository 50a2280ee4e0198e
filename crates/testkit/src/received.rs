//! One HTTP/1.1 request as a test server reads it off a connection: the
//! Git server over smart HTTP and the webhook receiver read the same way.

use std::io::BufRead;
use std::time::Instant;

/// One request a test server received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The request line as sent, `GET /shop.git/info/refs?service=… HTTP/1.1`.
    pub line: String,
    pub method: String,
    /// The path and the query, `/hook?x=1`.
    pub target: String,
    /// Names lower-cased, in the order sent.
    pub headers: Vec<(String, String)>,
    /// Its length from `Content-Length`, or read chunk by chunk.
    pub body: Vec<u8>,
    pub at: Instant,
}

impl Received {
    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The target without its query.
    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(&self.target, |(p, _)| p)
    }

    /// The target's query, empty without one.
    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }

    /// The body as JSON; panics if it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "body is not JSON ({error}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// The next request on the connection; `None` when the client is gone or
/// sent something that is not an HTTP request.
pub(crate) fn read_request(reader: &mut impl BufRead) -> Option<Received> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let target = parts.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let mut request = Received {
        line,
        method,
        target,
        headers,
        body: Vec::new(),
        at: Instant::now(),
    };
    request.body = if request
        .header("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        read_chunked(reader)?
    } else {
        let length: usize = request
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).ok()?;
        body
    };
    Some(request)
}

/// A body sent with `Transfer-Encoding: chunked`.
fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).ok()?;
        let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).ok()?;
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}
