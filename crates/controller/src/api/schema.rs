//! Structural OpenAPI schemas for the parts of the Application spec whose
//! Rust types live in other crates (`tether_source::Source`,
//! `tether_core::diff::IgnoreRule`, health rules).
//!
//! The API server validates every Application against them, so `kubectl
//! apply` refuses `source: {}`, `path: 7` or an unknown renderer with the
//! field's path, before the controller ever reads it. They are written out
//! rather than derived so that the owning crates stay free of schema
//! generators; `tests::the_schemas_accept_what_the_types_read` keeps the two
//! in step.

use schemars::{Schema, SchemaGenerator, json_schema};
use tether_core::{HealthStatus, Vocabulary};
use tether_source::VerifyMode;

/// A word of one of Tether's vocabularies (`SyncStatus`, `HealthStatus`, …):
/// a string, one of its words.
pub(crate) fn word<T: Vocabulary>(_: &mut SchemaGenerator) -> Schema {
    let words: Vec<&str> = T::ALL.iter().map(|word| word.as_str()).collect();
    json_schema!({"type": "string", "enum": words})
}

/// The schema of a list whose items are defined (and validated) by the crate
/// that owns them: objects the API server stores as given.
pub(crate) fn open_object_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "array", "items":
        {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
}

/// `syncPolicy.prunePropagation`: one of the deletion propagations. The
/// derived schema of an `Option` of an enum lists `null` among the words,
/// which `kubectl apply`'s validation refuses (the API server does not).
pub(crate) fn prune_propagation(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "enum": ["foreground", "background", "orphan"]})
}

/// A Project's rules: see `tether_core::project::Rules`.
pub(crate) fn project_rules(_: &mut SchemaGenerator) -> Schema {
    let patterns = |description: &str| {
        json_schema!({"type": "array", "items": {"type": "string", "minLength": 1},
            "description": description})
    };
    let kinds = json_schema!({"type": "array", "items": {"type": "object", "required": ["kind"],
        "properties": {
            "group": {"type": "string", "description": "API group pattern; empty for the core group."},
            "kind": {"type": "string", "minLength": 1, "description": "Kind pattern."}}}});
    let scope = |description: &str| {
        json_schema!({"type": "object", "description": description, "properties": {
            "allow": kinds.clone(), "deny": kinds.clone()}})
    };
    json_schema!({
        "type": "object",
        "properties": {
            "applicationNamespaces": patterns("Namespaces whose Applications belong to this project (patterns: * within a path segment, ** across)."),
            "sourceRepos": patterns("Repository URLs its Applications may be synced from (patterns); none if empty."),
            "destinationNamespaces": patterns("Namespaces its Applications may change (patterns); empty means each Application's own namespace only."),
            "destinationClusters": patterns("Registered clusters its Applications may deploy to (patterns, matched against spec.destination.cluster); empty means only the cluster Tether runs in."),
            "syncWindows": windows("Sync windows for the project's Applications, besides each one's own syncPolicy.syncWindows.", true),
            "clusterResources": scope("Cluster-scoped kinds: allow (unset: none) and deny."),
            "namespacedResources": scope("Namespaced kinds: allow (unset: all) and deny."),
            "allowFileSources": {"type": "boolean",
                "description": "Whether its Applications may read repositories on the controller's file system (file:// and paths)."},
            "requireVerification": {"type": "boolean",
                "description": "Whether every Application must verify commit signatures (spec.source.verify)."}
        }
    })
}

/// `spec.sources`: a list of what `spec.source` holds, each named.
pub(crate) fn sources(generator: &mut SchemaGenerator) -> Schema {
    let one = source(generator);
    json_schema!({"type": "array", "minItems": 1, "maxItems": 20, "items": one,
        "description": "Several sources as one desired state; a Helm source reads a named source's files as $NAME/path in valueFiles."})
}

/// `spec.source`: see `tether_source::Source`.
pub(crate) fn source(_: &mut SchemaGenerator) -> Schema {
    let strings = json_schema!({"type": "array", "items": {"type": "string"}});
    let verify_modes: Vec<&str> = VerifyMode::ALL.iter().map(|mode| mode.as_str()).collect();
    let named = |description: &str| {
        json_schema!({"type": "object", "additionalProperties": {"type": "string"},
            "description": description})
    };
    json_schema!({
        "type": "object",
        "description": "Where the desired state lives and how it is rendered.",
        "required": ["repoURL"],
        "properties": {
            "repoURL": {"type": "string", "minLength": 1,
                "description": "A Git repository: file://, http(s)://, ssh://, git:// or scp-like git@host:path. With chart: a Helm repository (http(s):// serving index.yaml) or an OCI registry path (oci://registry/path)."},
            "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]*$",
                "description": "The source's name in sources; a Helm source reads its files as $NAME/path in valueFiles. A named Git source without a path only lends files."},
            "ref": {"type": "string", "pattern": "^[a-zA-Z0-9_-]*$",
                "description": "Argo CD's spelling of name."},
            "chart": {"type": "string",
                "description": "A chart's name in the Helm repository or under the OCI path at repoURL; empty for a Git source."},
            "version": {"type": "string",
                "description": "The chart's version: exact (1.2.3), a range (1.2.x, >=1.2 <2, ^1.2), empty for the highest stable; for OCI also a manifest digest (sha256:… or 1.2.3@sha256:…)."},
            "insecure": {"type": "boolean",
                "description": "Plain HTTP to an oci:// registry."},
            "revision": {"type": "string",
                "description": "A branch, a tag, a semver range over tags, a full commit SHA, or empty for HEAD."},
            "path": {"type": "string", "description": "Directory inside the repository; empty for the root."},
            "interval": {"type": "string", "pattern": "^([0-9]+[dhms])+$",
                "description": "How often the repository is polled for a new commit: 10s, 3m, 1h (default 3m, or tether run --poll-interval)."},
            "secretRef": {"type": "object", "required": ["name"],
                "properties": {"name": {"type": "string", "minLength": 1}}},
            "renderer": {
                "type": "object",
                "description": "Exactly one of directory, kustomize, helm, jsonnet (default directory).",
                "maxProperties": 1,
                "properties": {
                    "directory": {"type": "object", "properties": {
                        "include": strings, "exclude": strings}},
                    "kustomize": {"type": "object"},
                    "helm": {"type": "object", "properties": {
                        "releaseName": {"type": "string"},
                        "namespace": {"type": "string"},
                        "valueFiles": strings,
                        "values": {"type": "string"}}},
                    "jsonnet": {"type": "object", "properties": {
                        "main": {"type": "string"},
                        "extVars": named("External variables (std.extVar), name: string."),
                        "extCode": named("External variables, name: Jsonnet code."),
                        "tlas": named("Top-level arguments of a main that is a function, name: string."),
                        "tlaCode": named("Top-level arguments, name: Jsonnet code.")}}
                }
            },
            "verify": {"type": "object", "properties": {
                "mode": {"type": "string", "enum": verify_modes},
                "openpgpKeys": strings,
                "allowedSigners": {"type": "string"}}}
        }
    })
}

/// `spec.ignoreDifferences`: see `tether_core::diff::IgnoreRule`.
pub(crate) fn ignore_rules(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["kind"],
            "properties": {
                "group": {"type": "string"},
                "kind": {"type": "string", "minLength": 1},
                "name": {"type": "string"},
                "namespace": {"type": "string"},
                "jsonPointers": {"type": "array", "items": {"type": "string", "pattern": "^(/.*)?$"}},
                "managedFieldsManagers": {"type": "array", "items": {"type": "string"}}
            }
        }
    })
}

/// `spec.health.rules`: see `tether_core::health::rules::file::RuleSpec`.
pub(crate) fn health_rules(generator: &mut SchemaGenerator) -> Schema {
    let cel = json_schema!({"type": "string"});
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["group", "kinds"],
            "properties": {
                "group": {"type": "string"},
                "kinds": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                "suspended": cel, "degraded": cel, "progressing": cel, "healthy": cel,
                "otherwise": word::<HealthStatus>(generator),
                "message": cel
            }
        }
    })
}

/// `syncPolicy.syncWindows`: see `tether_core::sync_window::WindowSpec`.
pub(crate) fn sync_windows(_: &mut SchemaGenerator) -> Schema {
    windows(
        "When automated syncs and self-heal may run (allow) or may not (deny).",
        false,
    )
}

/// A list of sync windows; a Project's name the apps they apply to.
fn windows(description: &str, for_project: bool) -> Schema {
    let mut properties = serde_json::json!({
        "kind": {"type": "string", "enum": ["allow", "deny"]},
        "schedule": {"type": "string", "minLength": 1,
            "description": "Cron (minute hour day-of-month month day-of-week) of when the window opens, e.g. 0 18 * * 5."},
        "duration": {"type": "string", "minLength": 1, "description": "How long it stays open: 1h, 90m, 2h30m."},
        "timeZone": {"type": "string", "description": "IANA time zone of the schedule, e.g. Europe/Berlin (default UTC)."},
        "manualSync": {"type": "boolean", "description": "Let tether sync run while this window blocks (default false)."}
    });
    if for_project {
        properties["applications"] = serde_json::json!({"type": "array",
            "items": {"type": "string", "minLength": 1},
            "description": "Application names (patterns) it applies to."});
        properties["selector"] = serde_json::json!({"type": "object",
            "description": "Applications whose labels it applies to; with applications, an Application either names is included; every Application of the project when neither is given.",
            "properties": {"matchLabels": {"type": "object",
                "additionalProperties": {"type": "string"}}}});
    }
    json_schema!({"type": "array", "description": description, "items": {"type": "object",
        "required": ["kind", "schedule", "duration"], "properties": properties}})
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// The properties a schema declares, for every object node, by path.
    fn declared(schema: &Value, path: &str, out: &mut Vec<String>) {
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (key, child) in properties {
                let child_path = format!("{path}.{key}");
                out.push(child_path.clone());
                declared(child, &child_path, out);
            }
        }
        if let Some(items) = schema.get("items") {
            declared(items, &format!("{path}[]"), out);
        }
    }

    /// Every key of `value`, by the same path convention.
    fn used(value: &Value, path: &str, out: &mut Vec<String>) {
        match value {
            // Jsonnet's variables and arguments are maps: their keys are the user's.
            Value::Object(_)
                if [".extVars", ".extCode", ".tlas", ".tlaCode"]
                    .iter()
                    .any(|map| path.ends_with(map)) => {}
            Value::Object(map) => {
                for (key, child) in map {
                    let child_path = format!("{path}.{key}");
                    out.push(child_path.clone());
                    used(child, &child_path, out);
                }
            }
            Value::Array(items) => items
                .iter()
                .for_each(|i| used(i, &format!("{path}[]"), out)),
            _ => {}
        }
    }

    #[test]
    fn the_schemas_accept_what_the_types_read() {
        let mut generator = SchemaGenerator::default();
        let schema = source(&mut generator).to_value();
        let mut declared_paths = Vec::new();
        declared(&schema, "", &mut declared_paths);
        // A source that sets every field of every renderer, as the types
        // serialize it: each key must be declared, or the API server would
        // prune it from stored Applications.
        let renderers = [
            json!({"directory": {"include": ["*.yaml"], "exclude": ["x"]}}),
            json!({"kustomize": {}}),
            json!({"helm": {"releaseName": "r", "namespace": "n",
                "valueFiles": ["a.yaml"], "values": "a: 1"}}),
            json!({"jsonnet": {"main": "m.jsonnet", "extVars": {"k": "v"}, "extCode": {"c": "1"},
                "tlas": {"env": "prod"}, "tlaCode": {"replicas": "3"}}}),
        ];
        for renderer in renderers {
            let spec = json!({"repoURL": "file:///r", "revision": "main", "path": "p",
                "chart": "c", "version": "1.x", "insecure": true, "name": "n",
                "renderer": renderer, "secretRef": {"name": "s"}, "interval": "10s",
                "verify": {"mode": "tag-and-head", "openpgpKeys": ["k"], "allowedSigners": "a"}});
            let typed: tether_source::Source = serde_json::from_value(spec.clone()).unwrap();
            let mut used_paths = Vec::new();
            used(&serde_json::to_value(&typed).unwrap(), "", &mut used_paths);
            for path in used_paths {
                assert!(
                    declared_paths.contains(&path),
                    "{path} is not in the schema"
                );
            }
        }
        let rule = json!({"group": "apps", "kind": "Deployment", "name": "web",
            "namespace": "shop", "jsonPointers": ["/spec/replicas"],
            "managedFieldsManagers": ["hpa"]});
        let typed: tether_core::diff::IgnoreRule = serde_json::from_value(rule).unwrap();
        let mut used_paths = Vec::new();
        used(
            &json!([serde_json::to_value(&typed).unwrap()]),
            "",
            &mut used_paths,
        );
        let mut declared_paths = Vec::new();
        declared(
            &ignore_rules(&mut generator).to_value(),
            "",
            &mut declared_paths,
        );
        for path in used_paths {
            assert!(
                declared_paths.contains(&path),
                "{path} is not in the schema"
            );
        }
    }

    #[test]
    fn a_projects_crd_declares_every_field_of_its_rules() {
        use kube::CustomResourceExt;
        let crd = serde_json::to_value(crate::api::Project::crd()).unwrap();
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        let mut declared_paths = Vec::new();
        declared(spec, "", &mut declared_paths);
        let rules = json!({"applicationNamespaces": ["a"], "sourceRepos": ["r"],
            "destinationNamespaces": ["d"], "destinationClusters": ["c"],
            "syncWindows": [{"kind": "deny", "schedule": "0 18 * * 5", "duration": "62h", "timeZone": "Europe/Berlin", "manualSync": true, "applications": ["shop-*"]}], "allowFileSources": true, "requireVerification": true,
            "clusterResources": {"allow": [{"group": "g", "kind": "K"}], "deny": [{"group": "g", "kind": "K"}]},
            "namespacedResources": {"allow": [{"group": "g", "kind": "K"}], "deny": [{"group": "g", "kind": "K"}]},
            "description": "d"});
        let typed: crate::api::ProjectSpec = serde_json::from_value(rules).unwrap();
        let mut used_paths = Vec::new();
        used(&serde_json::to_value(&typed).unwrap(), "", &mut used_paths);
        assert!(used_paths.len() > 8, "{used_paths:?}");
        for path in used_paths {
            assert!(declared_paths.contains(&path), "{path} is not in {spec}");
        }
    }
}
