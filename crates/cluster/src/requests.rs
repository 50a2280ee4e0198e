//! Counting the client's requests to the API server, named the way the
//! API server's audit log names them (verb and resource), so the
//! controller can export how many it makes without this crate knowing how.
//!
//! [`request_labels`] is the naming, a pure function; [`ObserveLayer`] is
//! the tower layer that calls an [`Observer`] once per request, when its
//! response (or error) arrives. A watch is counted once, when it starts.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Method, Request, Response, Uri};
use tower::{Layer, Service};

/// Told about each request: its verb, its resource, and the response's
/// status code (`error` when none came).
pub type Observer = Arc<dyn Fn(&str, &str, &str) + Send + Sync>;

/// The verb and resource of a request to the API server, as its audit log
/// names them: `GET /apis/apps/v1/namespaces/shop/deployments` is
/// (`list`, `deployments`), with `?watch=true` `watch`, `PATCH
/// …/deployments/web/status` (`patch`, `deployments/status`), `DELETE` of
/// a collection `deletecollection`. A request that names no resource
/// (discovery, `/version`) is its method in lower case and the first
/// segment of its path.
pub fn request_labels(method: &Method, uri: &Uri) -> (String, String) {
    let parts: Vec<&str> = uri.path().split('/').filter(|p| !p.is_empty()).collect();
    let non_resource = || {
        (
            method.as_str().to_ascii_lowercase(),
            parts.first().copied().unwrap_or_default().to_string(),
        )
    };
    // /api/{version}/… or /apis/{group}/{version}/…, then at least a resource.
    let rest = match parts.as_slice() {
        ["api", _version, rest @ ..] if !rest.is_empty() => rest,
        ["apis", _group, _version, rest @ ..] if !rest.is_empty() => rest,
        _ => return non_resource(),
    };
    // The old watch paths (/api/v1/watch/…) name their verb.
    let (special, rest) = match rest {
        ["watch", rest @ ..] if !rest.is_empty() => (Some("watch"), rest),
        _ => (None, rest),
    };
    // /namespaces/{namespace}/{resource}/…, but a namespace's own
    // subresources (status, finalize) are the namespace's.
    let parts = match rest {
        ["namespaces", _namespace, next, ..] if !matches!(*next, "status" | "finalize") => {
            &rest[2..]
        }
        _ => rest,
    };
    let (resource, named, subresource) = match parts {
        [resource] => (*resource, false, None),
        [resource, _name] => (*resource, true, None),
        [resource, _name, subresource, ..] => (*resource, true, Some(*subresource)),
        [] => return non_resource(),
    };
    let verb = match (special, method) {
        (Some(verb), _) => verb,
        (None, &Method::GET | &Method::HEAD) if named => "get",
        (None, &Method::GET | &Method::HEAD) if watches(uri) => "watch",
        (None, &Method::GET | &Method::HEAD) => "list",
        (None, &Method::POST) => "create",
        (None, &Method::PUT) => "update",
        (None, &Method::PATCH) => "patch",
        (None, &Method::DELETE) if named => "delete",
        (None, &Method::DELETE) => "deletecollection",
        (None, other) => return (other.as_str().to_ascii_lowercase(), resource.to_string()),
    };
    let resource = match subresource {
        Some(subresource) => format!("{resource}/{subresource}"),
        None => resource.to_string(),
    };
    (verb.to_string(), resource)
}

/// Whether the query says `watch=true` (or `1`, as the API server reads it).
fn watches(uri: &Uri) -> bool {
    uri.query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| matches!(pair, "watch=true" | "watch=1" | "watch=True"))
    })
}

/// Calls an [`Observer`] for every request through the service it wraps.
#[derive(Clone)]
pub struct ObserveLayer(pub Observer);

impl<S> Layer<S> for ObserveLayer {
    type Service = Observed<S>;

    fn layer(&self, inner: S) -> Observed<S> {
        Observed {
            inner,
            observer: self.0.clone(),
        }
    }
}

/// A service whose requests are observed (see [`ObserveLayer`]).
#[derive(Clone)]
pub struct Observed<S> {
    inner: S,
    observer: Observer,
}

impl<S, B, R> Service<Request<B>> for Observed<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<R>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let (verb, resource) = request_labels(request.method(), request.uri());
        let observer = self.observer.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await;
            let code = match &response {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "error".to_string(),
            };
            observer(&verb, &resource, &code);
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(method: Method, uri: &str) -> (String, String) {
        request_labels(&method, &uri.parse().unwrap())
    }

    fn pair(verb: &str, resource: &str) -> (String, String) {
        (verb.to_string(), resource.to_string())
    }

    #[test]
    fn requests_are_named_by_verb_and_resource_as_the_audit_log_names_them() {
        let table = [
            (
                Method::GET,
                "/api/v1/namespaces/x/pods/y",
                pair("get", "pods"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/x/pods",
                pair("list", "pods"),
            ),
            (Method::GET, "/api/v1/pods?limit=500", pair("list", "pods")),
            (
                Method::GET,
                "/apis/apps/v1/namespaces/x/deployments?watch=true&resourceVersion=1",
                pair("watch", "deployments"),
            ),
            (
                Method::GET,
                "/apis/tether.dev/v1alpha1/applications?allowWatchBookmarks=true&watch=1",
                pair("watch", "applications"),
            ),
            (
                Method::GET,
                "/api/v1/watch/namespaces/x/pods",
                pair("watch", "pods"),
            ),
            (
                Method::POST,
                "/apis/apps/v1/namespaces/x/deployments",
                pair("create", "deployments"),
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/x/leases/tether-controller",
                pair("update", "leases"),
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/x/deployments/web?fieldManager=tether",
                pair("patch", "deployments"),
            ),
            (
                Method::PATCH,
                "/apis/apps/v1/namespaces/x/deployments/web/status",
                pair("patch", "deployments/status"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/x/pods/web/log",
                pair("get", "pods/log"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/x/configmaps/settings",
                pair("delete", "configmaps"),
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/x/configmaps",
                pair("deletecollection", "configmaps"),
            ),
            // Namespaces are a resource of their own, with subresources.
            (
                Method::GET,
                "/api/v1/namespaces",
                pair("list", "namespaces"),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/shop",
                pair("get", "namespaces"),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/shop/finalize",
                pair("update", "namespaces/finalize"),
            ),
            (
                Method::POST,
                "/apis/authentication.k8s.io/v1/tokenreviews",
                pair("create", "tokenreviews"),
            ),
            // No resource: discovery and the version.
            (Method::GET, "/version", pair("get", "version")),
            (Method::GET, "/api", pair("get", "api")),
            (Method::GET, "/api/v1", pair("get", "api")),
            (Method::GET, "/apis/apps/v1", pair("get", "apis")),
            (Method::GET, "/", pair("get", "")),
        ];
        let wrong: Vec<String> = table
            .iter()
            .filter_map(|(method, uri, expected)| {
                let got = labels(method.clone(), uri);
                (got != *expected).then(|| format!("{method} {uri}: {got:?}, not {expected:?}"))
            })
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[tokio::test]
    async fn every_request_is_observed_once_with_its_status_code() {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = seen.clone();
        let observer: Observer = Arc::new(move |verb: &str, resource: &str, code: &str| {
            record
                .lock()
                .unwrap()
                .push(format!("{verb} {resource} {code}"));
        });
        let inner = tower::service_fn(|request: Request<()>| async move {
            let status = match request.method() {
                &Method::DELETE => 404,
                _ => 200,
            };
            Ok::<_, std::convert::Infallible>(Response::builder().status(status).body(()).unwrap())
        });
        let mut service = ObserveLayer(observer).layer(inner);
        for (method, uri) in [
            (Method::GET, "/api/v1/namespaces/x/pods?watch=true"),
            (Method::DELETE, "/api/v1/namespaces/x/pods/y"),
        ] {
            let request = Request::builder().method(method).uri(uri).body(()).unwrap();
            service.call(request).await.unwrap();
        }
        assert_eq!(*seen.lock().unwrap(), ["watch pods 200", "delete pods 404"]);
    }
}
