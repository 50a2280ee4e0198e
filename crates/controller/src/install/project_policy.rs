//! The admission policy that refuses, at `kubectl apply` time, an
//! Application whose own spec breaks its Project: a Project it names but
//! that does not hold its namespace, a repository outside `sourceRepos`, a
//! local repository the Project does not allow, a destination outside
//! `destinationNamespaces`, no verification where it is required.
//!
//! It is evaluated once per Project (the binding selects them all as
//! parameters) and judges the apps that Project governs: those naming it,
//! and those of the namespaces it claims that name none. The controller
//! decides the same with `tether_core::project` and also judges every
//! rendered object, and the apps that fall to `default` because no Project
//! claims their namespace; this policy only makes the common refusals
//! immediate. Patterns are compiled to RE2 as `tether_core::project::glob`
//! reads them: `*` within a path segment, `**` across.

use serde_json::{Value, json};

/// The policy's (and its binding's) name.
pub const PROJECT_POLICY: &str = "tether-projects";

/// CEL: a regular expression for the glob `pattern` (a CEL expression).
fn regex(pattern: &str) -> String {
    format!(
        r"'^' + r'\Q' + {pattern}.replace(r'\E', r'\E\\E\Q').replace('*', r'\E[^/]*\Q').replace(r'\E[^/]*\Q\E[^/]*\Q', r'\E.*\Q') + r'\E$'"
    )
}

/// CEL: whether `text` matches one of the globs in the list `patterns`.
fn any(patterns: &str, text: &str) -> String {
    format!("{patterns}.exists(p, {text}.matches({}))", regex("p"))
}

/// CEL: whether the repository URL `r` is on the controller's file system.
fn local(r: &str) -> String {
    format!(
        "({r}.contains('://') ? {r}.lowerAscii().startsWith('file://') : (!{r}.contains(':') || {r}.split(':')[0].contains('/') || {r}.startsWith(':')))"
    )
}

/// CEL: the forms of repository URL `r` a `sourceRepos` pattern may match
/// (as written, without a trailing `/`, and without `.git`).
fn forms(r: &str) -> String {
    let trimmed = format!("({r}.endsWith('/') ? {r}.substring(0, size({r}) - 1) : {r})");
    let bare = format!(
        "({trimmed}.endsWith('.git') ? {trimmed}.substring(0, size({trimmed}) - 4) : {trimmed})"
    );
    format!("[{r}, {trimmed}, {bare}]")
}

/// The policy and its binding.
pub fn manifests() -> Vec<Value> {
    let rule = |expression: String, message: &str| {
        json!({"expression": expression,
            "messageExpression": format!(
                "'Application ' + variables.app + ': ' + {message}")})
    };
    let spec = |field: &str| {
        format!("(has(params.spec) && has(params.spec.{field}) ? params.spec.{field} : [])")
    };
    let flag = |field: &str| {
        format!("(has(params.spec) && has(params.spec.{field}) && params.spec.{field})")
    };
    let joined = |field: &str| {
        format!(
            "(size({list}) == 0 ? 'none' : {list}.join(', '))",
            list = spec(field)
        )
    };
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": PROJECT_POLICY},
    // Ignore, not Fail: this policy only makes the controller's refusals
    // immediate, and when the API server cannot evaluate it (right after it
    // restarts, its mapper does not know the Project kind for a few seconds:
    // "failed to find resource referenced by paramKind") refusing every
    // Application write would stop users for no reason. The controller
    // judges every Application against its Project anyway.
    "spec": {"failurePolicy": "Ignore",
        "paramKind": {"apiVersion": "tether.dev/v1alpha1", "kind": "Project"},
        "matchConstraints": {"resourceRules": [{"apiGroups": ["tether.dev"], "apiVersions": ["*"],
            "operations": ["CREATE", "UPDATE"], "resources": ["applications"]}]},
        "matchConditions": [{"name": "spec-only", "expression": "!has(request.subResource) || request.subResource == ''"}],
        "variables": [
            {"name": "app", "expression": "object.metadata.namespace + '/' + object.metadata.name"},
            {"name": "named", "expression": "has(object.spec.project) ? object.spec.project : ''"},
            {"name": "claims", "expression": any(&spec("applicationNamespaces"), "object.metadata.namespace")},
            {"name": "governs", "expression":
                "variables.named == params.metadata.name || (variables.named == '' && variables.claims)"},
            {"name": "sources", "expression":
                "(has(object.spec.source) ? [object.spec.source] : []) + (has(object.spec.sources) ? object.spec.sources : [])"},
            {"name": "repos", "expression": "variables.sources.map(s, s.repoURL.trim())"},
            {"name": "destination", "expression": "object.spec.destination.namespace"},
        ],
        "validations": [
            rule("variables.named != params.metadata.name || variables.claims || params.metadata.name == 'default'".into(),
                &format!("'Project ' + params.metadata.name + ' does not hold Applications of namespace ' + object.metadata.namespace + ' (spec.applicationNamespaces: ' + {} + ')'", joined("applicationNamespaces"))),
            rule(format!("!variables.governs || {} || variables.repos.all(r, !{})", flag("allowFileSources"), local("r")),
                &format!("'repository ' + variables.repos.filter(r, {})[0] + ' is on the controller\\'s file system, which Project ' + params.metadata.name + ' does not allow (allowFileSources: false)'", local("r"))),
            rule(format!("!variables.governs || variables.repos.all(r, {} || {}.exists(form, {}))", local("r"), forms("r"), any(&spec("sourceRepos"), "form")),
                &format!("'repository ' + variables.repos.filter(r, !({} || {}.exists(form, {})))[0] + ' is not allowed by Project ' + params.metadata.name + ' (sourceRepos: ' + {} + ')'", local("r"), forms("r"), any(&spec("sourceRepos"), "form"), joined("sourceRepos"))),
            rule(format!("!variables.governs || (size({list}) == 0 ? variables.destination == object.metadata.namespace : {matches})",
                    list = spec("destinationNamespaces"), matches = any(&spec("destinationNamespaces"), "variables.destination")),
                &format!("'destination namespace ' + variables.destination + ' is not allowed by Project ' + params.metadata.name + ' (destinationNamespaces: ' + (size({list}) == 0 ? object.metadata.namespace + ' only (the Application\\'s own)' : {list}.join(', ')) + ')'", list = spec("destinationNamespaces"))),
            rule(format!("!variables.governs || !{} || variables.sources.all(s, has(s.verify) && has(s.verify.mode) && s.verify.mode != 'none')", flag("requireVerification")),
                "'Project ' + params.metadata.name + ' requires signed commits (requireVerification); set verify on every source'"),
        ]}});
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": PROJECT_POLICY},
        "spec": {"policyName": PROJECT_POLICY, "validationActions": ["Deny"],
            "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"}}});
    vec![policy, binding]
}
