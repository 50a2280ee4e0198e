//! Custom health rules in CEL, and the library of rules we ship.
//!
//! A [`RuleSet`] is a stack of layers: rules a user gives (a rules file,
//! per cluster or per Application) over the rules shipped with Tether
//! ([`RuleSet::shipped`]) over the built-in checks. A rule that fails to
//! compile is an error when the rules are loaded, naming the rule; a rule
//! that fails while evaluating gives `Unknown` with the error, never a
//! panic. See [`file`] for the format.

mod eval;
pub mod file;
mod glob;

use std::fmt;

use kube_cel::KubeCelExt;
use kube_cel::cel::Context;
use serde_json::Value;

use super::generic::{self, Signal};
use super::{Health, HealthStatus, Subject, builtin_at, now};
use eval::{Bindings, Compiled};
use file::{RuleSpec, RulesFile};

/// `("shipped/NAME.yaml", its text)` for each NAME: the file's path names it
/// in errors, so the path is written once and cannot drift from the file read.
macro_rules! shipped {
    ($($name:literal),* $(,)?) => {
        &[$((
            concat!("shipped/", $name, ".yaml"),
            include_str!(concat!("shipped/", $name, ".yaml")),
        )),*]
    };
}

/// The rules files shipped with Tether, embedded in the binary.
const SHIPPED: &[(&str, &str)] = shipped![
    "cert-manager",
    "argo-rollouts",
    "flux",
    "external-secrets",
    "keda",
    "gateway-api",
    "sealed-secrets",
    "crossplane",
    "cluster-api",
    "cloudnative-pg",
    "strimzi",
    "prometheus-operator",
    "knative",
    "tekton",
    "velero",
    "volume-snapshot",
    "kubevirt",
    "olm",
    "karpenter",
    "kyverno",
    "elastic-eck",
    "rook-ceph",
    "istio",
    "mongodb-community",
    "vault-secrets-operator",
];

/// Why rules could not be loaded. Nothing is loaded when any rule is bad.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// The file is not a rules file.
    #[error("{origin}: not a health rules file: {message}")]
    Parse { origin: String, message: String },
    /// An expression does not compile.
    #[error("{origin}: rule {rule}: `{field}` does not compile: {message}")]
    Compile {
        origin: String,
        rule: String,
        field: &'static str,
        message: String,
    },
    /// The rule is malformed in another way.
    #[error("{origin}: rule {rule}: {message}")]
    Invalid {
        origin: String,
        rule: String,
        message: String,
    },
}

/// A compiled rule: which objects it judges and how.
#[derive(Debug)]
pub struct Rule {
    /// `origin: group/kinds`, for messages.
    pub name: String,
    group: String,
    kinds: Vec<String>,
    /// The status expressions, in the order they are tried.
    checks: Vec<(HealthStatus, Compiled)>,
    otherwise: HealthStatus,
    message: Option<Compiled>,
}

impl Rule {
    fn compile(origin: &str, spec: RuleSpec) -> Result<Rule, RuleError> {
        let name = format!("{}/{}", spec.group, spec.kinds.join(","));
        let invalid = |message: String| RuleError::Invalid {
            origin: origin.to_string(),
            rule: name.clone(),
            message,
        };
        if spec.kinds.is_empty() {
            return Err(invalid("`kinds` is empty".into()));
        }
        let otherwise = match &spec.otherwise {
            None => HealthStatus::Progressing,
            Some(word) => word
                .parse()
                .map_err(|error| invalid(format!("`otherwise`: {error}")))?,
        };
        let compile = |field: &'static str, source: &str| {
            eval::compile(source).map_err(|message| RuleError::Compile {
                origin: origin.to_string(),
                rule: name.clone(),
                field,
                message,
            })
        };
        let mut checks = Vec::new();
        for (field, status, source) in [
            ("suspended", HealthStatus::Suspended, &spec.suspended),
            ("degraded", HealthStatus::Degraded, &spec.degraded),
            ("progressing", HealthStatus::Progressing, &spec.progressing),
            ("healthy", HealthStatus::Healthy, &spec.healthy),
        ] {
            if let Some(source) = source {
                checks.push((status, compile(field, source)?));
            }
        }
        if checks.is_empty() {
            return Err(invalid(
                "no status expression (suspended, degraded, progressing, healthy)".into(),
            ));
        }
        let message = match &spec.message {
            Some(source) => Some(compile("message", source)?),
            None => None,
        };
        Ok(Rule {
            name: format!("{origin}: {name}"),
            group: spec.group,
            kinds: spec.kinds,
            checks,
            otherwise,
            message,
        })
    }

    fn is_exact(&self) -> bool {
        !self.group.contains('*') && self.kinds.iter().all(|kind| !kind.contains('*'))
    }

    fn matches(&self, group: &str, kind: &str) -> bool {
        glob::matches(&self.group, group)
            && self
                .kinds
                .iter()
                .any(|pattern| glob::matches(pattern, kind))
    }

    /// Judges `object`; any evaluation error is `Unknown` with the error.
    fn judge(&self, root: &Context<'_>, object: &Value, subject: &Subject) -> Health {
        let failed = |field: &str, error: String| {
            subject.health(
                HealthStatus::Unknown,
                format!("health rule {} failed in `{field}`: {error}", self.name),
            )
        };
        let bindings = match Bindings::of(object) {
            Ok(bindings) => bindings,
            Err(error) => return failed("self", error),
        };
        let mut status = self.otherwise;
        for (candidate, compiled) in &self.checks {
            match eval::evaluate_bool(root, compiled, &bindings) {
                Ok(true) => {
                    status = *candidate;
                    break;
                }
                Ok(false) => {}
                Err(error) => return failed(field_name(*candidate), error),
            }
        }
        let message = match &self.message {
            None => String::new(),
            Some(compiled) => {
                match eval::evaluate_string(root, compiled, &bindings, status.as_str()) {
                    Ok(message) => message,
                    Err(error) => return failed("message", error),
                }
            }
        };
        subject.health(status, message)
    }
}

fn field_name(status: HealthStatus) -> &'static str {
    match status {
        HealthStatus::Suspended => "suspended",
        HealthStatus::Degraded => "degraded",
        HealthStatus::Progressing => "progressing",
        _ => "healthy",
    }
}

/// Health rules in layers, highest precedence first, over the built-in
/// checks. Cheap to share: build it once when the rules change.
pub struct RuleSet {
    layers: Vec<Vec<Rule>>,
    /// CEL functions (standard and Kubernetes), registered once.
    context: Context<'static>,
}

impl fmt::Debug for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleSet")
            .field("layers", &self.layers)
            .finish()
    }
}

impl Default for RuleSet {
    fn default() -> Self {
        RuleSet::with_layers(Vec::new())
    }
}

impl RuleSet {
    fn with_layers(layers: Vec<Vec<Rule>>) -> Self {
        let mut context = Context::default().with_all();
        context.add_function("get", eval::get);
        RuleSet { layers, context }
    }

    /// The rules shipped with Tether (cert-manager, Argo Rollouts, Flux,
    /// external-secrets, KEDA, Gateway API, Sealed Secrets, Crossplane,
    /// Cluster API, CloudNativePG, Strimzi, Prometheus Operator, Knative,
    /// Tekton, Velero, CSI volume snapshots, KubeVirt, OLM, Karpenter,
    /// Kyverno, Elastic ECK, Rook Ceph, Istio, MongoDB Community, Vault
    /// Secrets Operator).
    pub fn shipped() -> Self {
        let mut rules = Vec::new();
        for (origin, text) in SHIPPED {
            let layer = parse_layer(origin, text).unwrap_or_else(|error| {
                panic!("a shipped health rule is broken (a test catches this): {error}")
            });
            rules.extend(layer);
        }
        RuleSet::with_layers(vec![rules])
    }

    /// Loads one rules file (`origin` names it in errors), compiling every
    /// expression now so a bad rule is reported before it is used.
    ///
    /// ```
    /// use tether_core::health::{HealthStatus, RuleSet};
    /// let rules = RuleSet::from_yaml("rules.yaml", r#"
    /// rules:
    /// - group: example.com
    ///   kinds: [Widget]
    ///   healthy: "self.?status.?ready.orValue(false)"
    ///   message: "health == 'Healthy' ? 'ready' : 'waiting'"
    /// "#).unwrap();
    /// let widget = serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget",
    ///     "metadata": {"name": "w"}, "status": {"ready": true}});
    /// let health = rules.assess(&widget).unwrap();
    /// assert_eq!(health.status, HealthStatus::Healthy);
    /// assert_eq!(health.message, "Widget w: ready");
    /// ```
    pub fn from_yaml(origin: &str, text: &str) -> Result<Self, RuleError> {
        Ok(RuleSet::with_layers(vec![parse_layer(origin, text)?]))
    }

    /// These rules, taking precedence over `lower`'s (user rules over
    /// shipped rules: `user.over(RuleSet::shipped())`).
    pub fn over(mut self, lower: RuleSet) -> Self {
        self.layers.extend(lower.layers);
        self
    }

    /// The number of rules in all layers.
    pub fn len(&self) -> usize {
        self.layers.iter().map(Vec::len).sum()
    }

    /// Whether there are no rules at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rule that judges objects of `group` and `kind`: the first layer
    /// with a match wins, and within a layer an exact match beats a glob.
    pub fn rule_for(&self, group: &str, kind: &str) -> Option<&Rule> {
        self.layers.iter().find_map(|layer| {
            let mut matching = layer.iter().filter(|rule| rule.matches(group, kind));
            let first = matching.next()?;
            if first.is_exact() {
                return Some(first);
            }
            Some(matching.find(|rule| rule.is_exact()).unwrap_or(first))
        })
    }

    /// Assesses `object`: pending deletion first, then the matching rule,
    /// else the built-in checks ([`super::assess`]).
    pub fn assess(&self, object: &Value) -> Option<Health> {
        self.assess_at(object, now())
    }

    /// [`RuleSet::assess`] at a given time (Unix seconds).
    pub fn assess_at(&self, object: &Value, now: i64) -> Option<Health> {
        assess_stacked_at(&[self], object, now)
    }

    /// [`RuleSet::assess`] with the path of the decision
    /// ([`explain_stacked_at`]).
    pub fn explain(&self, object: &Value) -> (Option<Health>, Vec<String>) {
        explain_stacked_at(&[self], object, now())
    }
}

/// Assesses `object` with a stack of rule sets, highest precedence first:
/// the first set with a rule for the object's group and kind judges it,
/// else the built-in checks. The same decision as [`RuleSet::over`], for
/// sets that are shared (an Application's rules over the cluster's rules
/// over the shipped ones) and so cannot be merged by value.
///
/// ```
/// use tether_core::health::{HealthStatus, RuleSet, rules::assess_stacked};
/// let app = RuleSet::from_yaml("app", "rules:\n- group: example.com\n  kinds: [Widget]\n  healthy: 'true'\n").unwrap();
/// let shipped = RuleSet::shipped();
/// let widget = serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget",
///     "metadata": {"name": "w"}});
/// let health = assess_stacked(&[&app, &shipped], &widget).unwrap();
/// assert_eq!(health.status, HealthStatus::Healthy);
/// ```
pub fn assess_stacked(stack: &[&RuleSet], object: &Value) -> Option<Health> {
    assess_stacked_at(stack, object, now())
}

/// [`assess_stacked`] at a given time (Unix seconds).
pub fn assess_stacked_at(stack: &[&RuleSet], object: &Value, now: i64) -> Option<Health> {
    judge_stacked(stack, object, now).0
}

/// Who judged an object, for [`explain_stacked_at`].
enum Judge<'a> {
    Deletion,
    Rule(&'a Rule),
    BuiltIn,
    Generic(Vec<Signal>),
    Nobody,
}

/// The verdict on `object` and who gave it: pending deletion first, then
/// the first set with a rule for its group and kind, then the built-in
/// checks, then the generic inference.
fn judge_stacked<'s>(
    stack: &[&'s RuleSet],
    object: &Value,
    now: i64,
) -> (Option<Health>, Judge<'s>) {
    let subject = Subject::of(object).at(now);
    if super::is_pending_deletion(object) {
        return (
            Some(subject.progressing("pending deletion")),
            Judge::Deletion,
        );
    }
    for set in stack {
        if let Some(rule) = set.rule_for(subject.group, subject.kind) {
            let health = rule.judge(&set.context, object, &subject);
            return (Some(health), Judge::Rule(rule));
        }
    }
    if let Some(health) = builtin_at(object, now) {
        return (Some(health), Judge::BuiltIn);
    }
    match generic::infer(object) {
        Some(inference) => (Some(inference.health), Judge::Generic(inference.signals)),
        None => (None, Judge::Nobody),
    }
}

/// The verdict on `object` and the path of the decision, one line a step
/// (`tether health --explain`): which rule or check judged it, or, for the
/// generic inference, every signal it weighed, heaviest first, the
/// decisive one marked.
pub fn explain_stacked_at(
    stack: &[&RuleSet],
    object: &Value,
    now: i64,
) -> (Option<Health>, Vec<String>) {
    let (health, judge) = judge_stacked(stack, object, now);
    let subject = Subject::of(object);
    let kind = if subject.group.is_empty() {
        subject.kind.to_string()
    } else {
        format!("{}/{}", subject.group, subject.kind)
    };
    let lines = match judge {
        Judge::Deletion => vec!["metadata.deletionTimestamp is set: pending deletion".to_string()],
        Judge::Rule(rule) => vec![format!("health rule {}", rule.name)],
        Judge::BuiltIn => vec![format!("built-in check for {kind}")],
        Judge::Generic(signals) => {
            let mut lines = vec![format!(
                "no health rule or built-in check for {kind}: generic inference, heaviest signal decides"
            )];
            for (index, signal) in signals.iter().enumerate() {
                let mark = if index == 0 { "→" } else { " " };
                lines.push(format!("{mark} {}", signal.explain()));
            }
            lines
        }
        Judge::Nobody => vec![format!(
            "no health rule or built-in check for {kind}, and no status: no health"
        )],
    };
    (health, lines)
}

fn parse_layer(origin: &str, text: &str) -> Result<Vec<Rule>, RuleError> {
    let file: RulesFile = serde_saphyr::from_str(text).map_err(|error| RuleError::Parse {
        origin: origin.to_string(),
        message: error
            .to_string()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
    })?;
    file.rules
        .into_iter()
        .map(|spec| Rule::compile(origin, spec))
        .collect()
}
