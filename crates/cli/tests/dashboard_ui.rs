//! The dashboard the controller serves at `/ui`: nothing without a token
//! the API server knows (401), nothing for a token without the right to
//! list Applications (403), the namespace's apps for one with it — by
//! header or by the sign-in cookie — and never the token itself or a
//! Secret value in any answer.

mod support;

use std::time::Duration;

use kube::api::Api;
use serde_json::json;
use support::dashboard::not_following;
use support::metrics::{run_serving, service_account_token};
use support::{Repo, bind_cluster_role, create_app, installed};
use tether_controller::api::Application;
use tether_controller::install::rbac::TENANT_ROLE;
use tether_core::SyncStatus;
use tether_testkit::{eventually, free_port, status_of};

const PLANTED: &str = "planted-ui-secret-51b0d3";

/// GET `url` with `token` as bearer (or `cookie`): status and body, which
/// must hold neither the token nor the planted value.
async fn get(url: &str, token: Option<&str>, cookie: Option<&str>) -> (u16, String) {
    let mut request = not_following().get(url);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    let response = request.send().await.expect("the controller answers");
    let status = response.status().as_u16();
    // The event stream never ends: read what is there, then stop.
    let body = match tokio::time::timeout(Duration::from_secs(1), response.text()).await {
        Ok(body) => body.unwrap_or_default(),
        Err(_) => String::new(),
    };
    assert!(!body.contains(PLANTED), "{url} served the Secret value");
    for secret in [token, cookie].into_iter().flatten() {
        let bare = secret.trim_start_matches("tether-token=");
        assert!(!body.contains(bare), "{url} served the token");
    }
    (status, body)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_ui_answers_only_tokens_the_api_server_vouches_for_and_allows() {
    let ns = installed("dash-ui").await;
    let n = ns.name.clone();
    let repo = Repo::new();
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: api-token\nstringData:\n  token: {PLANTED}\n"
    );
    repo.commit(&[("app/secret.yaml", secret)], "a secret");
    create_app(&ns, &repo, json!({"automated": true}));
    let port = free_port();
    let _controller = run_serving(&ns, "dash-ui", port);
    let apps: Api<Application> = ns.api();
    status_of(&apps, "shop", "Synced", |s| {
        s.sync.status == SyncStatus::Synced
    })
    .await;
    let base = format!("http://127.0.0.1:{port}/ui/");

    // The controller's HTTP port answers.
    eventually("the controller serving HTTP", || async {
        reqwest::get(&base).await.ok().map(|_| ())
    })
    .await;

    // No token, or one the API server does not know: 401 everywhere.
    for path in [
        "",
        "live",
        "events",
        &format!("apps/{n}/shop"),
        "break-glass",
    ] {
        let url = format!("{base}{path}");
        let (status, body) = get(&url, None, None).await;
        assert_eq!(status, 401, "{url}: {body}");
        assert!(!body.contains("shop"), "{url}: {body}");
        let (status, _) = get(&url, Some("not-a-token"), None).await;
        assert_eq!(status, 401, "{url}");
    }

    // A real token without the right to list Applications: 403, nothing shown.
    let nobody = service_account_token(&ns, "nobody");
    let (status, body) = get(&base, Some(&nobody), None).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("forbidden"), "{body}");
    assert!(!body.contains("shop"), "{body}");

    // A tenant of the namespace: its apps, by header and by cookie.
    let alice = service_account_token(&ns, "alice");
    bind_cluster_role(
        &ns,
        "rolebinding",
        "alice-tenant",
        TENANT_ROLE,
        &format!("{n}:alice"),
    );
    bind_cluster_role(
        &ns,
        "rolebinding",
        "alice-view",
        "view",
        &format!("{n}:alice"),
    );
    let shown = eventually("alice's RBAC in effect", || async {
        let (status, body) = get(&base, Some(&alice), None).await;
        (status == 200).then_some(body)
    })
    .await;
    assert!(shown.contains(&format!("data-app=\"{n}/shop\"")), "{shown}");
    assert!(shown.contains("<base href=\"/ui/\">"), "{shown}");
    let (status, page) = get(&format!("{base}apps/{n}/shop"), Some(&alice), None).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Acting as"), "{page}");

    // Signing in: the form sets an HttpOnly cookie; the cookie is enough.
    let (status, form) = get(&format!("{base}login"), None, None).await;
    assert_eq!(status, 200, "{form}");
    let signed_in = not_following()
        .post(format!("{base}login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={alice}"))
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status().as_u16(), 303);
    let set_cookie = signed_in.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"));
    let cookie = set_cookie.split(';').next().unwrap().to_string();
    let (status, body) = get(&base, None, Some(&cookie)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&format!("data-app=\"{n}/shop\"")), "{body}");
}
