//! Repository URLs: which object store a URL uses, and whether two URLs
//! (say a webhook's `https://` and a source's scp-like `git@host:path`)
//! name the same repository.

/// The identity of a repository: lower-case host (with port) and path,
/// without scheme, user, trailing `/` or `.git`. `file://` URLs and local
/// paths keep their path.
///
/// ```
/// use tether_source::git::repo_key;
/// assert_eq!(repo_key("git@GitHub.com:org/app.git"), "github.com/org/app");
/// assert_eq!(repo_key("https://github.com/org/app/"), "github.com/org/app");
/// assert_eq!(repo_key("ssh://git@github.com:22/org/app.git"), "github.com:22/org/app");
/// ```
pub fn repo_key(url: &str) -> String {
    let url = url.trim();
    let (host, path) = match url.split_once("://") {
        Some(("file", path)) => ("", path),
        Some((_scheme, rest)) => rest.split_once('/').unwrap_or((rest, "")),
        None => match url.split_once(':') {
            // scp-like `user@host:path`; a path with a `/` before `:` is local.
            Some((host, path)) if !host.contains('/') => (host, path),
            _ => ("", url),
        },
    };
    let host = host
        .rsplit_once('@')
        .map_or(host, |(_, h)| h)
        .to_ascii_lowercase();
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path).trim_matches('/');
    if host.is_empty() {
        format!("/{path}")
    } else {
        format!("{host}/{path}")
    }
}

/// A directory name for the repository's object store: readable, unique.
pub(crate) fn store_name(url: &str) -> String {
    use sha2::Digest;
    let key = repo_key(url);
    let hash = hex::encode(&sha2::Sha256::digest(key.as_bytes())[..8]);
    let tail: String = key
        .rsplit('/')
        .next()
        .unwrap_or("repo")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(40)
        .collect();
    format!("{tail}-{hash}.git")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_url_form_of_one_repository_has_one_key() {
        let key = "example.com/shop/web";
        for url in [
            "https://example.com/shop/web.git",
            "http://user@example.com/shop/web",
            "git://example.com/shop/web.git/",
            "git@example.com:shop/web.git",
            "ssh://git@example.com/shop/web",
        ] {
            assert_eq!(repo_key(url), key, "{url}");
        }
        assert_eq!(repo_key("file:///srv/git/web.git"), "/srv/git/web");
        assert_eq!(repo_key("/srv/git/web"), "/srv/git/web");
        assert_eq!(
            store_name("git@example.com:shop/web.git"),
            store_name("https://example.com/shop/web")
        );
    }
}
