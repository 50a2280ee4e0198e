//! Compiling and evaluating CEL expressions against one object.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::extractors::Arguments;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::parser::{Expression, Parser};
use kube_cel::cel::{self, Context, ExecutionError, ResolveResult, Value as CelValue};
use serde_json::Value;

/// A compiled expression and its source, for error messages.
pub(super) struct Compiled {
    pub source: String,
    expression: Expression,
}

impl std::fmt::Debug for Compiled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.source)
    }
}

/// Parses `source`, with optional syntax enabled; the error is one line.
///
/// Names are resolved when evaluating (macros bind their own variables),
/// so a misspelt variable surfaces as `Unknown` with the error.
pub(super) fn compile(source: &str) -> Result<Compiled, String> {
    let expression = Parser::new()
        .enable_optional_syntax(true)
        .parse(source)
        .map_err(|errors| errors.to_string().replace('\n', "; "))?;
    Ok(Compiled {
        source: source.to_string(),
        expression,
    })
}

/// `get(value, 'a.b.c', default)`: the field at a dotted path of maps, or
/// `default` when any step is missing or null. Rules use it to read fields
/// that may not be set yet without guarding every step with `has()`.
pub(super) fn get(Arguments(args): Arguments) -> ResolveResult {
    let [target, CelValue::String(path), default] = args.as_slice() else {
        return Err(ExecutionError::function_error(
            "get",
            "expects (value, 'dotted.path', default)",
        ));
    };
    let mut current = target.clone();
    for step in path.split('.') {
        let next = match &current {
            CelValue::Map(map) => map
                .map
                .get(&Key::String(Arc::new(step.to_string())))
                .cloned(),
            _ => None,
        };
        match next {
            None | Some(CelValue::Null) => return Ok(default.clone()),
            Some(value) => current = value,
        }
    }
    Ok(current)
}

/// The values an object's expressions are evaluated with.
pub(super) struct Bindings {
    object: CelValue,
    conditions: CelValue,
}

impl Bindings {
    /// Converts `object` once for all of a rule's expressions.
    pub fn of(object: &Value) -> Result<Self, String> {
        let converted = cel::to_value(object).map_err(|error| error.to_string())?;
        let mut by_type = HashMap::new();
        if let Some(conditions) = object
            .pointer("/status/conditions")
            .and_then(Value::as_array)
        {
            for condition in conditions {
                if let Some(type_) = condition.get("type").and_then(Value::as_str) {
                    let value = cel::to_value(condition).map_err(|error| error.to_string())?;
                    by_type.insert(Key::String(Arc::new(type_.to_string())), value);
                }
            }
        }
        Ok(Bindings {
            object: converted,
            conditions: CelValue::Map(Map {
                map: Arc::new(by_type),
            }),
        })
    }
}

/// Evaluates `compiled` in a scope of `root` holding the bindings (and
/// `health` when given).
pub(super) fn evaluate(
    root: &Context<'_>,
    compiled: &Compiled,
    bindings: &Bindings,
    health: Option<&str>,
) -> Result<CelValue, String> {
    let mut scope = root.new_inner_scope();
    scope.add_variable_from_value("self", bindings.object.clone());
    scope.add_variable_from_value("conditions", bindings.conditions.clone());
    if let Some(health) = health {
        scope.add_variable_from_value("health", health.to_string());
    }
    CelValue::resolve(&compiled.expression, &scope).map_err(|error| error.to_string())
}

/// Evaluates a boolean expression.
pub(super) fn evaluate_bool(
    root: &Context<'_>,
    compiled: &Compiled,
    bindings: &Bindings,
) -> Result<bool, String> {
    match evaluate(root, compiled, bindings, None)? {
        CelValue::Bool(value) => Ok(value),
        other => Err(format!("expected a bool, got {other:?}")),
    }
}

/// Evaluates a string expression; `null` is the empty string.
pub(super) fn evaluate_string(
    root: &Context<'_>,
    compiled: &Compiled,
    bindings: &Bindings,
    health: &str,
) -> Result<String, String> {
    match evaluate(root, compiled, bindings, Some(health))? {
        CelValue::String(text) => Ok(text.to_string()),
        CelValue::Null => Ok(String::new()),
        other => Err(format!("expected a string, got {other:?}")),
    }
}
