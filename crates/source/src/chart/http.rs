//! HTTP for chart sources: one blocking client per set of credentials,
//! trusting only the source's CA when it names one, presenting its client
//! certificate, never going through a proxy from the environment, and
//! bounded in time and size.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::blocking::{Client, RequestBuilder};
use reqwest::header::{ACCEPT, AUTHORIZATION, ETAG, IF_NONE_MATCH, WWW_AUTHENTICATE};

use super::ChartError;
use crate::credentials::Credentials;

/// The most a chart source reads in one response (an index or an archive).
const MAX_BODY: u64 = 128 << 20;

/// A client for one source and its credentials.
pub(crate) struct Http {
    client: Client,
}

/// What a GET answered.
pub(crate) enum Got {
    Body {
        bytes: Vec<u8>,
        etag: Option<String>,
    },
    NotModified,
}

impl Http {
    pub fn new(url: &str, credentials: Option<&Credentials>) -> Result<Http, ChartError> {
        let invalid = |reason: String| ChartError::Invalid {
            url: url.to_string(),
            reason,
        };
        let mut builder = Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(120))
            .user_agent(concat!("tether/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = credentials.and_then(Credentials::ca_cert) {
            let certificate = reqwest::Certificate::from_pem(ca.as_bytes())
                .map_err(|error| invalid(format!("caCert is not a PEM certificate: {error}")))?;
            builder = builder.tls_certs_only([certificate]);
        }
        if let Some(Credentials::Http {
            client_cert: Some(client_cert),
            ..
        }) = credentials
        {
            let pem = format!(
                "{}\n{}",
                client_cert.cert.trim_end(),
                client_cert.key.expose()
            );
            let identity = reqwest::Identity::from_pem(pem.as_bytes()).map_err(|_| {
                invalid("tls.crt/tls.key are not a PEM certificate and its key".into())
            })?;
            builder = builder.identity(identity);
        }
        let client = builder
            .build()
            .map_err(|error| invalid(format!("HTTP client: {error}")))?;
        Ok(Http { client })
    }

    /// GETs `url` with `authorization` (a header value) and `accept`; with
    /// `etag`, conditionally (`If-None-Match`).
    pub fn get(
        &self,
        url: &str,
        authorization: Option<&str>,
        accept: &[&str],
        etag: Option<&str>,
    ) -> Result<Got, Answer> {
        let mut request = self.client.get(url);
        if !accept.is_empty() {
            request = request.header(ACCEPT, accept.join(", "));
        }
        if let Some(etag) = etag {
            request = request.header(IF_NONE_MATCH, etag);
        }
        self.send(url, request, authorization)
    }

    fn send(
        &self,
        url: &str,
        mut request: RequestBuilder,
        authorization: Option<&str>,
    ) -> Result<Got, Answer> {
        if let Some(value) = authorization {
            request = request.header(AUTHORIZATION, value);
        }
        let response = request.send().map_err(|error| {
            Answer::Failed(ChartError::Unreachable {
                url: url.to_string(),
                reason: tether_core::error_text::one_line(&error),
            })
        })?;
        let status = response.status();
        if status == StatusCode::NOT_MODIFIED {
            return Ok(Got::NotModified);
        }
        if status == StatusCode::UNAUTHORIZED {
            let challenge = response
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_string();
            return Err(Answer::Unauthorized { challenge });
        }
        if !status.is_success() {
            let code = status.as_u16();
            let body = response.text().unwrap_or_default();
            let reason = format!("{status}{}", detail(&body));
            return Err(Answer::Failed(match code {
                403 => ChartError::Unauthorized {
                    url: url.to_string(),
                    reason,
                },
                404 => ChartError::NotFound {
                    url: url.to_string(),
                    reason,
                },
                _ => ChartError::Unreachable {
                    url: url.to_string(),
                    reason,
                },
            }));
        }
        let etag = response
            .headers()
            .get(ETAG)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        let mut bytes = Vec::new();
        use std::io::Read;
        response
            .take(MAX_BODY + 1)
            .read_to_end(&mut bytes)
            .map_err(|error| {
                Answer::Failed(ChartError::Unreachable {
                    url: url.to_string(),
                    reason: format!("reading the response: {error}"),
                })
            })?;
        if bytes.len() as u64 > MAX_BODY {
            return Err(Answer::Failed(ChartError::Invalid {
                url: url.to_string(),
                reason: format!("the response is larger than {} MiB", MAX_BODY >> 20),
            }));
        }
        Ok(Got::Body { bytes, etag })
    }
}

/// A GET that did not succeed.
pub(crate) enum Answer {
    /// 401, with the server's `WWW-Authenticate` challenge.
    Unauthorized {
        challenge: String,
    },
    Failed(ChartError),
}

impl Answer {
    /// As an error of `url`, a 401 meaning the credentials were refused
    /// (or missing).
    pub fn into_error(self, url: &str, had_credentials: bool) -> ChartError {
        match self {
            Answer::Failed(error) => error,
            Answer::Unauthorized { .. } => ChartError::Unauthorized {
                url: url.to_string(),
                reason: if had_credentials {
                    "401 Unauthorized: the credentials were refused".into()
                } else {
                    "401 Unauthorized: the server wants credentials (spec.source.secretRef)".into()
                },
            },
        }
    }
}

/// `: first line of the body` when the body is short text, else nothing.
fn detail(body: &str) -> String {
    let line = body.lines().next().unwrap_or_default().trim();
    if line.is_empty() || line.len() > 200 || line.starts_with('<') {
        return String::new();
    }
    format!(": {line}")
}
