//! Tether's web dashboard: the status fields are the dashboard.
//!
//! `tether dashboard` runs it with the user's own kubeconfig, so each
//! person sees exactly what their RBAC lets them list. One watch on the
//! Applications fills a cache ([`cache`]), in the controller only while
//! the dashboard is used; every page is rendered from it
//! ([`overview`] decides, [`page`] writes the HTML) and every browser is
//! told of changes through one broadcast ([`server`]'s `/events`).

pub mod actions;
pub mod address;
pub mod app;
pub mod cache;
pub mod overview;
pub mod page;
pub mod server;
pub mod tokens;
pub mod user;
pub mod windows;

use std::net::SocketAddr;

use tokio::net::TcpListener;

pub use address::{Listen, RemoteRefused, checked};
pub use cache::{Cache, CacheError};
pub use user::{Acting, User};

/// Why the dashboard could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error("listening on {address}: {source}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("serving the dashboard: {0}")]
    Serve(#[source] std::io::Error),
}

/// A dashboard listening and its cache filled, ready to [`serve`](Dashboard::serve).
pub struct Dashboard {
    listener: TcpListener,
    shared: server::Shared,
}

impl Dashboard {
    /// Starts the watch on the Applications of `namespace` (all when
    /// none) as `client`'s user, waits for its first list, and listens on
    /// `listen` (see [`checked`]).
    pub async fn start(
        client: kube::Client,
        namespace: Option<&str>,
        listen: Listen,
    ) -> Result<Dashboard, Error> {
        let address = listen.address();
        let cache = cache::watch(client.clone(), namespace, cache::Keep::Always).await?;
        // The first list is complete before the first page is served.
        cache.apps().await;
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| Error::Bind { address, source })?;
        let user = User {
            name: whoami(&client).await,
            client,
            sees: user::Sees::AllCached,
        };
        let shared = server::Shared {
            cache,
            acting: Acting::Kubeconfig(user),
            base: "/".to_string(),
        };
        Ok(Dashboard { listener, shared })
    }

    /// `http://ADDRESS/`, with the port actually bound.
    pub fn url(&self) -> String {
        match self.listener.local_addr() {
            Ok(address) => format!("http://{address}/"),
            Err(_) => "the dashboard's address".to_string(),
        }
    }

    /// Serves until the process is stopped.
    pub async fn serve(self) -> Result<(), Error> {
        // Only `Host: <this address>` is answered (a DNS-rebinding guard).
        let address = self.listener.local_addr().map_err(Error::Serve)?;
        let guard = axum::middleware::from_fn_with_state(address, actions::host::guard);
        let app = server::app(self.shared).layer(guard);
        // The watch stops with the last clone of the cache, the router's.
        axum::serve(self.listener, app).await.map_err(Error::Serve)
    }
}

/// The kubeconfig's user name as the API server sees it (a
/// SelfSubjectReview), or `your kubeconfig's user` when it cannot say.
async fn whoami(client: &kube::Client) -> String {
    match tether_controller::break_glass::request::whoami(client).await {
        Ok(identity) => identity.username,
        Err(_) => "your kubeconfig's user".to_string(),
    }
}

/// The dashboard as the controller serves it, to be nested at `/ui`: the
/// Applications of `namespace` (all when none) watched with
/// `connection`'s own identity, each request's user known by its bearer
/// token (see [`tokens`]) and acting with that token alone. The
/// Applications are watched from the first request on, until
/// [`cache::IDLE_LIMIT`] passes without one.
pub async fn in_controller(
    connection: tether_cluster::Connection,
    namespace: Option<&str>,
) -> Result<axum::Router, Error> {
    let client = connection
        .client()
        .map_err(|e| Error::Serve(std::io::Error::other(e.to_string())))?;
    // Watched only while someone uses the dashboard.
    let cache = cache::watch(client, namespace, cache::Keep::WhileUsed(cache::IDLE_LIMIT)).await?;
    let users = tokens::TokenUsers::new(connection, cache.clone())
        .map_err(|e| Error::Serve(std::io::Error::other(e)))?;
    let shared = server::Shared {
        cache,
        acting: Acting::Tokens(std::sync::Arc::new(users)),
        base: "/ui/".to_string(),
    };
    Ok(server::routes().merge(tokens::routes()).with_state(shared))
}
