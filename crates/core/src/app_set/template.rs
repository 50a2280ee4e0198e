//! Template expansion: every `{{param}}` (spaces inside the braces allowed)
//! in the template's keys and string values replaced by the parameter's
//! value, as Argo CD's default (fasttemplate) templating. A parameter the
//! generator did not make is an error naming the set, the generator, the
//! parameter and where it is used: never an app with a hole in it.

use serde_json::{Map, Value};

use super::generator::{Generated, LOCAL_CLUSTER};

/// Why a parameter set could not make an Application.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error(
        "ApplicationSet {set}: {generator}: template parameter {parameter} is not generated (used at {at})"
    )]
    MissingParameter {
        set: String,
        generator: String,
        parameter: String,
        at: String,
    },
    #[error("ApplicationSet {set}: {generator}: unclosed {{{{ at {at}")]
    Unclosed {
        set: String,
        generator: String,
        at: String,
    },
    #[error("ApplicationSet {set}: {generator}: the template made no metadata.name")]
    NoName { set: String, generator: String },
}

/// The Application `template` (`metadata` with `name`, `labels`,
/// `annotations`; and `spec`) makes with `generated`'s parameters: a
/// JSON object with `metadata` and `spec`. A `spec.destination.cluster`
/// of [`LOCAL_CLUSTER`] is dropped (the local cluster has no name).
pub fn expand(set: &str, generated: &Generated, template: &Value) -> Result<Value, TemplateError> {
    let mut context = Context {
        set,
        generated,
        at: Vec::new(),
    };
    let mut app = context.value(template)?;
    if app
        .pointer("/spec/destination/cluster")
        .and_then(Value::as_str)
        == Some(LOCAL_CLUSTER)
        && let Some(destination) = app
            .pointer_mut("/spec/destination")
            .and_then(Value::as_object_mut)
    {
        destination.remove("cluster");
    }
    let named = app
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_some_and(|name| !name.is_empty());
    if !named {
        return Err(TemplateError::NoName {
            set: set.to_string(),
            generator: generated.generator.clone(),
        });
    }
    Ok(app)
}

struct Context<'a> {
    set: &'a str,
    generated: &'a Generated,
    at: Vec<String>,
}

impl Context<'_> {
    fn value(&mut self, value: &Value) -> Result<Value, TemplateError> {
        Ok(match value {
            Value::String(text) => Value::String(self.text(text)?),
            Value::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    self.at.push(format!("[{i}]"));
                    out.push(self.value(item)?);
                    self.at.pop();
                }
                Value::Array(out)
            }
            Value::Object(map) => {
                let mut out = Map::with_capacity(map.len());
                for (key, item) in map {
                    self.at.push(format!(".{key}"));
                    let key = self.text(key)?;
                    out.insert(key, self.value(item)?);
                    self.at.pop();
                }
                Value::Object(out)
            }
            other => other.clone(),
        })
    }

    fn where_(&self) -> String {
        self.at.concat().trim_start_matches('.').to_string()
    }

    fn text(&self, text: &str) -> Result<String, TemplateError> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            out.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else {
                return Err(TemplateError::Unclosed {
                    set: self.set.to_string(),
                    generator: self.generated.generator.clone(),
                    at: self.where_(),
                });
            };
            let name = after[..close].trim();
            match self.generated.params.get(name) {
                Some(value) => out.push_str(value),
                None => {
                    return Err(TemplateError::MissingParameter {
                        set: self.set.to_string(),
                        generator: self.generated.generator.clone(),
                        parameter: name.to_string(),
                        at: self.where_(),
                    });
                }
            }
            rest = &after[close + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app_set::Params;
    use serde_json::json;

    fn generated(pairs: &[(&str, &str)]) -> Generated {
        Generated {
            generator: "generators[0].list".into(),
            params: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Params>(),
        }
    }

    fn template() -> Value {
        json!({
            "metadata": {"name": "{{path.basename}}-{{ env }}", "labels": {"team-{{env}}": "yes"}},
            "spec": {"source": {"repoURL": "https://git.example/mono.git", "path": "{{path}}"},
                     "destination": {"namespace": "{{path.basename}}", "cluster": "{{name}}"},
                     "syncPolicy": {"prune": true}}
        })
    }

    #[test]
    fn parameters_fill_names_keys_and_values_and_leave_other_values_alone() {
        let app = expand(
            "mono",
            &generated(&[
                ("path", "apps/shop"),
                ("path.basename", "shop"),
                ("env", "dev"),
                ("name", "eu-1"),
            ]),
            &template(),
        )
        .unwrap();
        assert_eq!(app["metadata"]["name"], "shop-dev");
        assert_eq!(app["metadata"]["labels"]["team-dev"], "yes");
        assert_eq!(app["spec"]["source"]["path"], "apps/shop");
        assert_eq!(app["spec"]["destination"]["cluster"], "eu-1");
        assert_eq!(app["spec"]["syncPolicy"]["prune"], true);
    }

    #[test]
    fn the_local_cluster_becomes_no_cluster() {
        let app = expand(
            "mono",
            &generated(&[
                ("path", "a"),
                ("path.basename", "a"),
                ("env", "dev"),
                ("name", "in-cluster"),
            ]),
            &template(),
        )
        .unwrap();
        assert_eq!(app["spec"]["destination"], json!({"namespace": "a"}));
    }

    #[test]
    fn a_missing_parameter_names_the_set_the_generator_the_parameter_and_where() {
        let error = expand(
            "mono",
            &generated(&[("path", "a"), ("path.basename", "a"), ("name", "x")]),
            &template(),
        )
        .unwrap_err();
        let TemplateError::MissingParameter {
            set,
            generator,
            parameter,
            at,
        } = &error
        else {
            panic!("{error}");
        };
        assert_eq!(
            (set.as_str(), generator.as_str(), parameter.as_str()),
            ("mono", "generators[0].list", "env")
        );
        assert!(at.starts_with("metadata."), "{at}");
        assert!(
            error.to_string().starts_with(
                "ApplicationSet mono: generators[0].list: template parameter env is not generated (used at metadata."
            ),
            "{error}"
        );
    }

    #[test]
    fn an_unclosed_brace_and_an_empty_name_are_refused() {
        let unclosed = expand(
            "mono",
            &generated(&[]),
            &json!({"metadata": {"name": "{{oops"}}),
        )
        .unwrap_err();
        assert!(
            matches!(unclosed, TemplateError::Unclosed { .. }),
            "{unclosed}"
        );
        let nameless = expand("mono", &generated(&[]), &json!({"spec": {}})).unwrap_err();
        assert!(
            matches!(nameless, TemplateError::NoName { .. }),
            "{nameless}"
        );
    }
}
