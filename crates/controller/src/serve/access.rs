//! Who may read `/metrics`: whoever the API server vouches for, as
//! controller-runtime's secure metrics do it (`WithAuthenticationAndAuthorization`).
//!
//! The caller's bearer token is checked with a TokenReview (unknown or
//! missing: 401), then its user with a SubjectAccessReview for the
//! non-resource URL `/metrics`, verb `get` (not allowed: 403) — the right
//! the ClusterRole `tether-metrics-reader` grants. Verdicts are kept per
//! token hash for [`ALLOWED_FOR`] (refusals for [`REFUSED_FOR`]), at most
//! [`REMEMBERED`] of them, so a Prometheus scraping every 15 s costs a few
//! API requests a minute. A token is never logged nor kept: only its
//! SHA-256.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

/// How long an allowed token is believed without asking again.
pub const ALLOWED_FOR: Duration = Duration::from_secs(60);
/// How long a refused token is refused without asking again (shorter: a
/// binding just created should not wait long).
pub const REFUSED_FOR: Duration = Duration::from_secs(10);
/// The most verdicts kept at once.
pub const REMEMBERED: usize = 1024;

/// What the API server said about a token, for one path and verb.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Authenticated and authorized.
    Allowed,
    /// No token, or one the API server does not know (401).
    Unauthenticated,
    /// A known user without the right (403); the user's name.
    Forbidden(String),
}

/// Why a token could not be judged (the API server failed): answered 500,
/// and not remembered.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("reviewing a token (TokenReview) failed: {}", tether_cluster::error::describe(.0))]
    TokenReview(kube::Error),
    #[error(
        "reviewing user {user}'s access (SubjectAccessReview) failed: {}",
        tether_cluster::error::describe(.error)
    )]
    AccessReview { user: String, error: kube::Error },
}

/// Remembered verdicts, by token hash; pure, so its timing is tested
/// without a clock.
#[derive(Default)]
pub struct Verdicts {
    kept: HashMap<[u8; 32], (Verdict, Instant)>,
}

impl Verdicts {
    /// The verdict on the token with `hash`, if one is remembered at `now`.
    pub fn get(&self, hash: &[u8; 32], now: Instant) -> Option<Verdict> {
        let (verdict, until) = self.kept.get(hash)?;
        (now < *until).then(|| verdict.clone())
    }

    /// Remembers `verdict` from `now`: forgets expired verdicts when full,
    /// and all of them if that is not enough.
    pub fn put(&mut self, hash: [u8; 32], verdict: Verdict, now: Instant) {
        if self.kept.len() >= REMEMBERED {
            self.kept.retain(|_, (_, until)| now < *until);
            if self.kept.len() >= REMEMBERED {
                self.kept.clear();
            }
        }
        let lasts = match verdict {
            Verdict::Allowed => ALLOWED_FOR,
            _ => REFUSED_FOR,
        };
        self.kept.insert(hash, (verdict, now + lasts));
    }

    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

/// Judges bearer tokens for `get` on one non-resource path, with the API
/// server's reviews.
#[derive(Clone)]
pub struct Access {
    client: Client,
    path: String,
    verdicts: Arc<Mutex<Verdicts>>,
}

impl Access {
    /// Access to `path` (`/metrics`), reviewed with `client`.
    pub fn new(client: Client, path: &str) -> Access {
        Access {
            client,
            path: path.to_string(),
            verdicts: Arc::default(),
        }
    }

    /// The verdict on `token` (`None`: no token given).
    pub async fn judge(&self, token: Option<&str>) -> Result<Verdict, AccessError> {
        let Some(token) = token.filter(|t| !t.is_empty()) else {
            return Ok(Verdict::Unauthenticated);
        };
        let hash: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(verdict) = self
            .verdicts
            .lock()
            .expect("lock")
            .get(&hash, Instant::now())
        {
            return Ok(verdict);
        }
        let verdict = self.review(token).await?;
        self.verdicts
            .lock()
            .expect("lock")
            .put(hash, verdict.clone(), Instant::now());
        Ok(verdict)
    }

    /// Asks the API server who `token` is, then whether they may.
    async fn review(&self, token: &str) -> Result<Verdict, AccessError> {
        let Some(user) = token_user(&self.client, token)
            .await
            .map_err(AccessError::TokenReview)?
        else {
            return Ok(Verdict::Unauthenticated);
        };
        let username = user.username.clone().unwrap_or_default();
        let path = NonResourceAttributes {
            path: Some(self.path.clone()),
            verb: Some("get".into()),
        };
        let allowed = user_may(&self.client, &user, None, Some(path))
            .await
            .map_err(|error| AccessError::AccessReview {
                user: username.clone(),
                error,
            })?;
        match allowed {
            true => Ok(Verdict::Allowed),
            false => Ok(Verdict::Forbidden(username)),
        }
    }
}

/// The user the API server says `token` is (a TokenReview); `None` when
/// it does not know the token. The dashboard signs its users in with it.
pub async fn token_user(client: &Client, token: &str) -> Result<Option<UserInfo>, kube::Error> {
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            audiences: None,
        },
        ..TokenReview::default()
    };
    let reviewed = Api::<TokenReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    let status = reviewed.status.unwrap_or_default();
    Ok(status.user.filter(|_| status.authenticated == Some(true)))
}

/// Whether the API server lets `user` do what the attributes say, on a
/// resource or a non-resource URL (a SubjectAccessReview).
pub async fn user_may(
    client: &Client,
    user: &UserInfo,
    resource_attributes: Option<ResourceAttributes>,
    non_resource_attributes: Option<NonResourceAttributes>,
) -> Result<bool, kube::Error> {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            groups: user.groups.clone(),
            uid: user.uid.clone(),
            extra: user.extra.clone(),
            resource_attributes,
            non_resource_attributes,
        },
        ..SubjectAccessReview::default()
    };
    let reviewed = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(reviewed.status.is_some_and(|s| s.allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(byte: u8) -> [u8; 32] {
        [byte; 32]
    }

    #[test]
    fn an_allowed_token_is_believed_for_a_minute_and_a_refused_one_for_ten_seconds() {
        let start = Instant::now();
        let mut verdicts = Verdicts::default();
        verdicts.put(hash(1), Verdict::Allowed, start);
        verdicts.put(hash(2), Verdict::Forbidden("bob".into()), start);
        verdicts.put(hash(3), Verdict::Unauthenticated, start);
        let later = |seconds| start + Duration::from_secs(seconds);
        assert_eq!(verdicts.get(&hash(1), later(59)), Some(Verdict::Allowed));
        assert_eq!(
            verdicts.get(&hash(2), later(9)),
            Some(Verdict::Forbidden("bob".into()))
        );
        assert_eq!(
            verdicts.get(&hash(3), later(9)),
            Some(Verdict::Unauthenticated)
        );
        assert_eq!(verdicts.get(&hash(1), later(60)), None);
        assert_eq!(verdicts.get(&hash(2), later(10)), None);
        assert_eq!(verdicts.get(&hash(4), start), None);
    }

    #[test]
    fn the_verdicts_kept_are_bounded() {
        let start = Instant::now();
        let mut verdicts = Verdicts::default();
        for n in 0..REMEMBERED * 3 {
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&(n as u64).to_le_bytes());
            verdicts.put(key, Verdict::Allowed, start);
            assert!(verdicts.len() <= REMEMBERED);
        }
        // Expired ones make room first: the newest stays.
        let mut verdicts = Verdicts::default();
        for n in 0..REMEMBERED - 1 {
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&(n as u64).to_le_bytes());
            verdicts.put(key, Verdict::Unauthenticated, start);
        }
        verdicts.put(hash(0xee), Verdict::Allowed, start);
        let later = start + REFUSED_FOR;
        verdicts.put(hash(0xff), Verdict::Allowed, later);
        assert_eq!(verdicts.len(), 2);
        assert_eq!(verdicts.get(&hash(0xee), later), Some(Verdict::Allowed));
    }
}
