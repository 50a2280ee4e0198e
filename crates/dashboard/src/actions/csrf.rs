//! Every action's form carries a token bound to its user: HMAC-SHA256, with
//! a key drawn at random when the process starts, over the user name. A
//! page of another site cannot know it, so it cannot post an action as the
//! person whose browser it runs in.

use std::sync::OnceLock;

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Why a form's token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsrfError {
    #[error("the form carries no CSRF token: reload the confirmation page and confirm again")]
    Missing,
    #[error(
        "the form's CSRF token is not {user}'s (a stale page, or another site posting): reload the confirmation page and confirm again"
    )]
    Wrong { user: String },
}

/// This process's key: 32 random bytes from the operating system.
fn key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).expect("the operating system gives random bytes");
        key
    })
}

fn mac(key: &[u8], user: &str) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(user.as_bytes());
    mac
}

/// The token of `user`'s forms, in hex.
pub fn token(user: &str) -> String {
    token_with(key(), user)
}

/// Whether `given` is `user`'s token, compared in constant time.
pub fn verify(user: &str, given: Option<&str>) -> Result<(), CsrfError> {
    verify_with(key(), user, given)
}

fn token_with(key: &[u8], user: &str) -> String {
    hex::encode(mac(key, user).finalize().into_bytes())
}

fn verify_with(key: &[u8], user: &str, given: Option<&str>) -> Result<(), CsrfError> {
    let given = given.map(str::trim).unwrap_or_default();
    if given.is_empty() {
        return Err(CsrfError::Missing);
    }
    let wrong = || CsrfError::Wrong {
        user: user.to_string(),
    };
    let bytes = hex::decode(given).map_err(|_| wrong())?;
    mac(key, user).verify_slice(&bytes).map_err(|_| wrong())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"a key for tests only, 32 bytes!!";

    #[test]
    fn a_users_own_token_is_accepted() {
        let token = token_with(KEY, "alice");
        assert_eq!(token.len(), 64);
        assert_eq!(verify_with(KEY, "alice", Some(&token)), Ok(()));
    }

    #[test]
    fn another_users_token_a_forged_one_or_none_is_refused_by_name() {
        let bobs = token_with(KEY, "bob");
        let wrong = CsrfError::Wrong {
            user: "alice".into(),
        };
        assert_eq!(verify_with(KEY, "alice", Some(&bobs)), Err(wrong.clone()));
        assert_eq!(verify_with(KEY, "alice", Some("zz")), Err(wrong.clone()));
        assert_eq!(verify_with(KEY, "alice", Some("abc")), Err(wrong));
        assert_eq!(verify_with(KEY, "alice", None), Err(CsrfError::Missing));
        assert_eq!(
            verify_with(KEY, "alice", Some(" ")),
            Err(CsrfError::Missing)
        );
    }

    #[test]
    fn another_process_key_makes_other_tokens() {
        assert_ne!(token_with(KEY, "alice"), token("alice"));
        assert_eq!(verify("alice", Some(&token("alice"))), Ok(()));
    }
}
