//! Helm values as Tether's `renderer.helm.values` takes them (one YAML
//! document): Argo CD's `values` text, its `valuesObject` over it, then its
//! `parameters` (`--set name=value`) over both, as Argo CD orders them.

use serde_json::{Map, Value};

/// The merged values; none when nothing is given, `Err` when the text does
/// not parse. Parameters that cannot be written as YAML are passed to
/// `skipped` (their index and why) and left out.
pub(crate) fn merge(
    text: Option<Value>,
    object: Option<Value>,
    parameters: &[Value],
    mut skipped: impl FnMut(usize, String),
) -> Option<Result<String, String>> {
    let text = text.map(|value| match value {
        Value::String(text) => text,
        other => serde_saphyr::to_string(&other).unwrap_or_default(),
    });
    if object.is_none() && parameters.is_empty() {
        return text.map(Ok);
    }
    let mut values = match &text {
        Some(text) => match serde_saphyr::from_str::<Value>(text) {
            Ok(Value::Null) => Value::Object(Map::new()),
            Ok(values) => values,
            Err(error) => return Some(Err(format!("the values do not parse: {error}"))),
        },
        None => Value::Object(Map::new()),
    };
    if let Some(object) = object {
        overlay(&mut values, object);
    }
    for (index, parameter) in parameters.iter().enumerate() {
        let name = parameter["name"].as_str().unwrap_or_default();
        let value = parameter["value"].as_str().unwrap_or_default();
        if name.is_empty() || name.contains(['[', '\\']) {
            skipped(
                index,
                format!(
                    "{name:?}: only plain dotted names are converted to values; write it in values"
                ),
            );
            continue;
        }
        let typed = match parameter["forceString"].as_bool() == Some(true) {
            true => Value::String(value.to_string()),
            false => typed(value),
        };
        set(&mut values, name, typed);
    }
    Some(serde_saphyr::to_string(&values).map_err(|error| error.to_string()))
}

/// `--set`'s reading of a value: booleans, integers and null as such,
/// anything else as a string.
fn typed(value: &str) -> Value {
    match value {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        _ => value
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::String(value.to_string())),
    }
}

/// Sets `path` (`image.tag`) in `values`, making mappings on the way.
fn set(values: &mut Value, path: &str, value: Value) {
    let mut here = values;
    let keys: Vec<&str> = path.split('.').collect();
    for key in &keys[..keys.len() - 1] {
        if !here[*key].is_object() {
            here[*key] = Value::Object(Map::new());
        }
        here = &mut here[*key];
    }
    here[keys[keys.len() - 1]] = value;
}

/// Helm values `top` over `base`: maps merge key by key, anything else
/// in `top` replaces what `base` has (as Helm layers `-f` files).
pub fn overlay(base: &mut Value, top: Value) {
    match (base, top) {
        (Value::Object(base), Value::Object(top)) => {
            for (key, value) in top {
                match base.get_mut(&key) {
                    Some(existing) => overlay(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, top) => *base = top,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parameters_override_values_object_which_overrides_the_text() {
        let merged = merge(
            Some(json!(
                "replicaCount: 1\nimage: {tag: v1, pullPolicy: Always}\n"
            )),
            Some(json!({"replicaCount": 2})),
            &[
                json!({"name": "image.tag", "value": "v2"}),
                json!({"name": "service.port", "value": "8080"}),
                json!({"name": "a[0]", "value": "x"}),
            ],
            |index, _| assert_eq!(index, 2),
        )
        .unwrap()
        .unwrap();
        let back: Value = serde_saphyr::from_str(&merged).unwrap();
        assert_eq!(
            back,
            json!({"replicaCount": 2, "image": {"tag": "v2", "pullPolicy": "Always"},
                   "service": {"port": 8080}})
        );
    }

    #[test]
    fn values_text_alone_is_kept_as_written() {
        let text = "# comment\nreplicaCount: 1\n";
        let merged = merge(Some(json!(text)), None, &[], |_, _| {});
        assert_eq!(merged, Some(Ok(text.to_string())));
    }
}
