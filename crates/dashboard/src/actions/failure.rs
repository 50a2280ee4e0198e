//! How an action that did not happen is answered: the object first, and
//! the API server's own words for a refusal. Nothing was half-done: each
//! action is one request, or (adopt, then close) stops at the first failure.

use std::error::Error as StdError;

use axum::http::StatusCode;

/// An action refused or failed, with the page's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub status: StatusCode,
    pub message: String,
}

impl Failure {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }

    /// A form the dashboard refused before asking anything.
    pub fn refused(message: impl ToString) -> Failure {
        Failure::new(StatusCode::BAD_REQUEST, message.to_string())
    }

    /// `error`, from acting as `user` on `object` in `namespace`: a 403
    /// says who may not do what, a 404 names the object, anything else
    /// is said after the object.
    pub fn of(
        error: &(dyn StdError + 'static),
        user: &str,
        object: &str,
        namespace: &str,
    ) -> Failure {
        match api_status(error) {
            Some(status) if status.code == 403 => Failure::new(
                StatusCode::FORBIDDEN,
                forbidden(user, namespace, &status.message),
            ),
            Some(status) if status.code == 404 => {
                Failure::new(StatusCode::NOT_FOUND, format!("{object} not found"))
            }
            _ => Failure::new(StatusCode::INTERNAL_SERVER_ERROR, chain(error, object)),
        }
    }
}

/// The API server's answer somewhere in `error`'s chain.
fn api_status<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a kube::core::Status> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(kube::Error::Api(status)) = error.downcast_ref::<kube::Error>() {
            return Some(status);
        }
        if let Some(tether_controller::break_glass::request::RequestError::Identity(
            kube::Error::Api(status),
        )) = error.downcast_ref()
        {
            return Some(status);
        }
        cause = error.source();
    }
    None
}

/// `OBJECT: cause: cause …`, each said once.
fn chain(error: &(dyn StdError + 'static), object: &str) -> String {
    let text = tether_core::error_text::one_line_with(error, |cause| {
        match cause.downcast_ref::<kube::Error>() {
            Some(error) => tether_cluster::error::describe(error),
            None => cause.to_string(),
        }
    });
    if text.starts_with(object) {
        text
    } else {
        format!("{object}: {text}")
    }
}

/// `forbidden: USER may not VERB RESOURCE in namespace NS (MESSAGE)`,
/// the verb and resource read from the API server's message (`User "x"
/// cannot patch resource "applications" …`).
pub fn forbidden(user: &str, namespace: &str, message: &str) -> String {
    let asked = message
        .split_once(" cannot ")
        .and_then(|(_, rest)| {
            let (verb, rest) = rest.split_once(' ')?;
            let resource = rest.strip_prefix("resource \"")?.split('"').next()?;
            Some(format!("{verb} {resource}"))
        })
        .unwrap_or_else(|| "do this".to_string());
    format!(
        "forbidden: {user} may not {asked} in namespace {namespace} (the API server: {message})"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MESSAGE: &str = r#"applications.tether.dev "web" is forbidden: User "alice" cannot patch resource "applications" in API group "tether.dev" in the namespace "team-b""#;

    fn api(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, "Forbidden")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn a_403_says_who_may_not_do_what_where_in_the_servers_words() {
        let failure = Failure::of(
            &api(403, MESSAGE),
            "alice",
            "Application team-b/web",
            "team-b",
        );
        assert_eq!(failure.status, StatusCode::FORBIDDEN);
        assert_eq!(
            failure.message,
            format!(
                "forbidden: alice may not patch applications in namespace team-b (the API server: {MESSAGE})"
            )
        );
    }

    #[test]
    fn a_404_names_the_object_and_a_wrapped_one_is_found_in_the_chain() {
        let wrapped = tether_controller::request::RequestError::Api {
            app: "team-a/gone".into(),
            source: api(404, "not found"),
        };
        let failure = Failure::of(&wrapped, "alice", "Application team-a/gone", "team-a");
        assert_eq!(failure.status, StatusCode::NOT_FOUND);
        assert_eq!(failure.message, "Application team-a/gone not found");
    }

    #[test]
    fn another_failure_is_said_after_the_object() {
        let failure = Failure::of(&api(500, "etcd is down"), "alice", "Application a/b", "a");
        assert_eq!(failure.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(
            failure.message.starts_with("Application a/b: "),
            "{}",
            failure.message
        );
        assert!(
            failure.message.contains("etcd is down"),
            "{}",
            failure.message
        );
    }
}
