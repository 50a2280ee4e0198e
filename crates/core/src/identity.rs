//! Who an Application's changes are made as (multi-tenancy's first
//! boundary): the ServiceAccount it names, else the controller's default
//! one, else — unless the controller is locked down — the controller
//! itself. Kubernetes RBAC then decides what the app may change, the way
//! Flux's `serviceAccountName` and `--default-service-account` work.

use std::fmt;

/// The identity an Application's dry runs, applies and prunes are made as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// The controller's own (no impersonation).
    Controller,
    /// A ServiceAccount of the Application's own namespace, impersonated.
    ServiceAccount { namespace: String, name: String },
}

impl Identity {
    /// The Kubernetes user name to impersonate, if any.
    pub fn user(&self) -> Option<String> {
        match self {
            Identity::Controller => None,
            Identity::ServiceAccount { namespace, name } => {
                Some(format!("system:serviceaccount:{namespace}:{name}"))
            }
        }
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Controller => f.write_str("the controller's own identity"),
            Identity::ServiceAccount { namespace, name } => {
                write!(f, "ServiceAccount {namespace}/{name}")
            }
        }
    }
}

/// How the controller chooses identities (`tether run
/// --default-service-account`, `--require-service-account`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityPolicy {
    /// The ServiceAccount (in each app's own namespace) for apps that name
    /// none.
    pub default_service_account: Option<String>,
    /// Refuse apps that name no ServiceAccount when there is no default:
    /// nothing is ever applied with the controller's own rights.
    pub require_service_account: bool,
}

/// Why an Application may not be reconciled as anyone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityRefusal {
    #[error(
        "spec.serviceAccountName is required: this controller runs with \
         --require-service-account, so nothing is applied with its own rights; \
         name a ServiceAccount of namespace {namespace} allowed to apply this app's objects"
    )]
    Required { namespace: String },
}

/// The identity the Application in `namespace` that names `named` (its
/// `spec.serviceAccountName`) is reconciled as, under `policy`.
pub fn identity(
    namespace: &str,
    named: Option<&str>,
    policy: &IdentityPolicy,
) -> Result<Identity, IdentityRefusal> {
    let named = named.filter(|name| !name.is_empty());
    let chosen = named.or(policy.default_service_account.as_deref());
    match chosen {
        Some(name) => Ok(Identity::ServiceAccount {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }),
        None if policy.require_service_account => Err(IdentityRefusal::Required {
            namespace: namespace.to_string(),
        }),
        None => Ok(Identity::Controller),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(default: Option<&str>, required: bool) -> IdentityPolicy {
        IdentityPolicy {
            default_service_account: default.map(str::to_string),
            require_service_account: required,
        }
    }

    fn account(namespace: &str, name: &str) -> Identity {
        Identity::ServiceAccount {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    #[test]
    fn an_app_naming_a_service_account_is_reconciled_as_that_account_of_its_own_namespace() {
        let chosen = identity("team-a", Some("deployer"), &policy(Some("other"), true));
        assert_eq!(chosen, Ok(account("team-a", "deployer")));
        assert_eq!(
            chosen.unwrap().user().as_deref(),
            Some("system:serviceaccount:team-a:deployer")
        );
    }

    #[test]
    fn an_app_naming_none_gets_the_default_account_of_its_own_namespace() {
        let chosen = identity("team-b", None, &policy(Some("tether"), true));
        assert_eq!(chosen, Ok(account("team-b", "tether")));
        let empty = identity("team-b", Some(""), &policy(Some("tether"), false));
        assert_eq!(empty, Ok(account("team-b", "tether")));
    }

    #[test]
    fn without_a_default_an_app_naming_none_runs_as_the_controller_unless_locked_down() {
        assert_eq!(
            identity("team-a", None, &policy(None, false)),
            Ok(Identity::Controller)
        );
        assert_eq!(Identity::Controller.user(), None);
        let refused = identity("team-a", None, &policy(None, true)).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("spec.serviceAccountName is required")
        );
        assert!(refused.to_string().contains("namespace team-a"));
    }
}
